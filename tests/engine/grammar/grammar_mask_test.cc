// The fast masks (mask cache + run-time checks) against the definition: a token is allowed iff
// AcceptToken on a copy of the matcher succeeds, for every token of real vocabularies.
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_vocab.h"
#include "tests/engine/grammar/grammar_test_util.h"
#include "tests/engine/grammar/test_grammars.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace textgen {
namespace grammar_mask_test {

using testing::MustParse;

// Under sanitizers (a slower build that looks for memory errors, not mask coverage) the checks
// against the reference run on fewer states.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kScale = 4;
#else
constexpr int kScale = 1;
#endif

std::shared_ptr<const GrammarVocab> Vocab(const std::string& model) {
  return GrammarVocab::Create(testing::GgufTokenizer(model));
}

std::shared_ptr<const CompiledGrammar> Compile(std::string_view gbnf,
                                               std::shared_ptr<const GrammarVocab> vocab) {
  auto c = CompiledGrammar::Compile(MustParse(gbnf), std::move(vocab));
  if (!c.ok()) FAIL(c.status().ToString());
  return *c;
}

TokenBitmask ReferenceMask(const GrammarMatcher& m) {
  const int32_t n = m.compiled().vocab()->size();
  TokenBitmask mask(n);
  for (int32_t id = 0; id < n; ++id) {
    GrammarMatcher copy = m;
    if (copy.AcceptToken(id)) mask.Set(id);
  }
  return mask;
}

// Compares the fast mask with the reference; on a mismatch names the first differing tokens.
void CheckMask(const GrammarMatcher& m, const std::string& where) {
  TokenBitmask fast;
  m.FillNextTokenMask(&fast);
  TokenBitmask ref = ReferenceMask(m);
  if (fast == ref) return;
  const GrammarVocab& vocab = *m.compiled().vocab();
  std::string diff;
  int shown = 0;
  for (int32_t id = 0; id < vocab.size() && shown < 8; ++id) {
    if (fast.Test(id) != ref.Test(id)) {
      diff += "\n  token " + std::to_string(id) + " '" + std::string(vocab.bytes(id)) +
              "' fast=" + std::to_string(fast.Test(id)) + " ref=" + std::to_string(ref.Test(id));
      ++shown;
    }
  }
  FAIL(where << ": fast mask differs from the reference" << diff);
}

// Feeds `doc`'s tokens, checking the mask before every `stride`-th token.
void CheckAlongDocument(const std::shared_ptr<const CompiledGrammar>& compiled,
                        const Tokenizer& tok, const std::string& doc, int stride) {
  GrammarMatcher m(compiled);
  std::vector<int32_t> ids = tok.Encode(doc, /*add_bos=*/false);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (static_cast<int>(i) % (stride * kScale) == 0)
      CheckMask(m, "before token " + std::to_string(i));
    TokenBitmask mask;
    m.FillNextTokenMask(&mask);
    REQUIRE(mask.Test(ids[i]));
    REQUIRE(m.AcceptToken(ids[i]));
  }
  CHECK(m.CanEnd());
  CheckMask(m, "at the end");
}

// Picks random allowed tokens (as a model with noise weights would), checking every mask.
// `max_parses`: stop early in states with more parse stacks (the reference is slow there).
void RandomWalk(const std::shared_ptr<const CompiledGrammar>& compiled, uint32_t seed, int steps,
                int max_parses = 1 << 30) {
  std::mt19937 rng(seed);
  GrammarMatcher m(compiled);
  for (int step = 0; step < steps && !m.IsTerminated() && m.num_stacks() <= max_parses; ++step) {
    CheckMask(m, "seed " + std::to_string(seed) + " step " + std::to_string(step));
    TokenBitmask mask;
    m.FillNextTokenMask(&mask);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < mask.size(); ++id) {
      if (mask.Test(id)) allowed.push_back(id);
    }
    REQUIRE_FALSE(allowed.empty());
    int32_t pick = allowed[rng() % allowed.size()];
    REQUIRE(m.AcceptToken(pick));
  }
}

TEST_CASE("masks: schema grammar along documents on the Qwen3 vocabulary",
          "[grammar][mask][slow]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
  auto compiled = Compile(testing::kPersonSchemaGbnf, GrammarVocab::Create(tok));
  CheckAlongDocument(compiled, tok, testing::kPersonDocs[0], 5);
  CheckAlongDocument(compiled, tok, testing::kPersonDocs[3], 7);
}

TEST_CASE("masks: free JSON along documents on the Llama 3.1 vocabulary", "[grammar][mask][slow]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-llama3.1.gguf");
  auto compiled = Compile(testing::kJsonGbnf, GrammarVocab::Create(tok));
  CheckAlongDocument(compiled, tok, testing::kJsonDocs[0], 6);
  CheckAlongDocument(compiled, tok, testing::kJsonDocs[1], 9);
}

// A random grammar over letters, spaces and punctuation: literals, classes (negated, `.`),
// groups, every repetition kind (small and large bounds, around the 32-byte clamp), rule
// references to later rules and right recursion.
std::string RandomGrammar(std::mt19937& rng) {
  const int num_rules = 2 + static_cast<int>(rng() % 4);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const char* classes[] = {"[a-e]", "[^a-m]", ".", "[ a-z]", "[.,!?]", "[^ ]"};
  const char* reps[] = {"*", "+", "?", "{2}", "{0,3}", "{1,40}", "{2,35}", "{3,}", "{0,100}"};
  std::function<std::string(int, int)> item;
  auto seq = [&](int rule, int depth) {
    std::string s;
    int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) s += item(rule, depth) + " ";
    if (pick(5) == 0) s += "\" \" r" + std::to_string(rule);  // right recursion after a literal
    return s;
  };
  item = [&](int rule, int depth) -> std::string {
    std::string s;
    switch (pick(depth < 2 ? 5 : 4)) {
      case 0: {
        s = "\"";
        for (int i = 0, n = 1 + pick(3); i < n; ++i) s += "abcdehst .,"[pick(11)];
        s += "\"";
        break;
      }
      case 1:
        s = classes[pick(6)];
        break;
      case 2:
        if (rule + 1 < num_rules) {
          s = "r" + std::to_string(rule + 1 + pick(num_rules - rule - 1));
        } else {
          s = "\"e\"";
        }
        break;
      case 3:
        s = "[a-z]";
        break;
      default:
        s = "(" + seq(rule, depth + 1) + " | " + seq(rule, depth + 1) + ")";
        break;
    }
    if (pick(3) == 0) s += reps[pick(9)];
    return s;
  };
  std::string g = "root ::= r0\n";
  for (int r = 0; r < num_rules; ++r) {
    g += "r" + std::to_string(r) + " ::= " + seq(r, 0);
    if (pick(2) == 0) g += " | " + seq(r, 0);
    g += "\n";
  }
  return g;
}

TEST_CASE("masks: random grammars on stories260K", "[grammar][mask]") {
  auto vocab = Vocab(testing::kStories260K);
  std::mt19937 rng(2024);
  int checked = 0;
  for (int i = 0; i < 60; ++i) {
    std::string gbnf = RandomGrammar(rng);
    INFO(gbnf);
    absl::StatusOr<std::shared_ptr<const Grammar>> g = ParseGbnf(gbnf);
    if (!g.ok()) continue;  // e.g. left recursion through a nullable prefix
    auto compiled = CompiledGrammar::Compile(*g, vocab);
    REQUIRE(compiled.ok());
    RandomWalk(*compiled, static_cast<uint32_t>(i), 25);
    ++checked;
  }
  CHECK(checked >= 40);
}

TEST_CASE("masks: random grammars on Qwen3", "[grammar][mask][slow]") {
  auto vocab = Vocab("vocab/ggml-vocab-qwen3.gguf");
  std::mt19937 rng(77);
  int checked = 0;
  while (checked < 2) {
    std::string gbnf = RandomGrammar(rng);
    INFO(gbnf);
    absl::StatusOr<std::shared_ptr<const Grammar>> g = ParseGbnf(gbnf);
    if (!g.ok()) continue;
    auto compiled = CompiledGrammar::Compile(*g, vocab);
    REQUIRE(compiled.ok());
    RandomWalk(*compiled, static_cast<uint32_t>(checked), 6 / kScale, /*max_parses=*/16);
    ++checked;
  }
}

TEST_CASE("masks: random walks on stories260K", "[grammar][mask]") {
  auto vocab = Vocab(testing::kStories260K);
  for (const char* gbnf : {testing::kPersonSchemaGbnf, testing::kJsonGbnf}) {
    auto compiled = Compile(gbnf, vocab);
    for (uint32_t seed = 1; seed <= 4; ++seed) RandomWalk(compiled, seed, 60);
  }
}

TEST_CASE("masks: random walks on Qwen3", "[grammar][mask][slow]") {
  auto vocab = Vocab("vocab/ggml-vocab-qwen3.gguf");
  auto compiled = Compile(testing::kPersonSchemaGbnf, vocab);
  RandomWalk(compiled, 7, 12 / kScale);
  auto json = Compile(testing::kJsonGbnf, vocab);
  RandomWalk(json, 8, 12 / kScale);
}

// The masks along a document's tokens.
std::vector<TokenBitmask> MasksAlong(const std::shared_ptr<const CompiledGrammar>& compiled,
                                     const std::vector<int32_t>& ids) {
  std::vector<TokenBitmask> masks;
  GrammarMatcher m(compiled);
  for (int32_t id : ids) {
    masks.emplace_back();
    m.FillNextTokenMask(&masks.back());
    if (!m.AcceptToken(id)) break;
  }
  return masks;
}

TEST_CASE("masks: one compiled grammar shared by threads", "[grammar][mask]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
  auto vocab = GrammarVocab::Create(tok);
  const std::string docs[] = {testing::kPersonDocs[0], testing::kPersonDocs[1],
                              testing::kPersonDocs[2]};
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& d : docs) ids.push_back(tok.Encode(d, false));
  // Each thread fills the shared mask cache while the others read it.
  auto shared = Compile(testing::kPersonSchemaGbnf, vocab);
  std::vector<std::vector<TokenBitmask>> got(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] { got[t] = MasksAlong(shared, ids[t]); });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 3; ++t) {
    std::vector<TokenBitmask> alone =
        MasksAlong(Compile(testing::kPersonSchemaGbnf, vocab), ids[t]);
    REQUIRE(alone.size() == ids[t].size());
    REQUIRE(got[t].size() == alone.size());
    for (size_t i = 0; i < alone.size(); ++i) CHECK(got[t][i] == alone[i]);
  }
}

}  // namespace grammar_mask_test
}  // namespace textgen
