// GrammarMatcher: tokens split across UTF-8 characters, token elements, EOG, copies, rollback,
// and the random-walk termination bound.
#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar_vocab.h"
#include "tests/engine/grammar/grammar_test_util.h"
#include "tests/engine/grammar/test_grammars.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace textgen {
namespace grammar_matcher_test {

using testing::MustParse;

// A small vocabulary: id -> bytes ("" = control token). 0 is EOS (EOG).
struct ToyVocab {
  std::vector<std::string> tokens = {"",     "[TOOL]",   "a",    "b", "ab",        "\xC3",
                                     "\xA9", "\xC3\xA9", "{",    "}", "\"",        "\"}",
                                     "x",    "\xE4\xB8", "\xAD", " ", "<|im_end|>"};
  std::shared_ptr<const GrammarVocab> Make() const {
    std::vector<std::string> bytes = tokens;
    bytes[1] = "";   // [TOOL_CALLS]-like control token: no bytes
    bytes[16] = "";  // <|im_end|>: control, EOG
    absl::flat_hash_map<std::string, int32_t> texts = {{"[TOOL]", 1}, {"<|im_end|>", 16}};
    return GrammarVocab::FromTokens(bytes, {0, 16}, texts);
  }
};

std::shared_ptr<const CompiledGrammar> Compile(std::string_view gbnf,
                                               std::shared_ptr<const GrammarVocab> vocab) {
  auto c = CompiledGrammar::Compile(MustParse(gbnf), std::move(vocab));
  if (!c.ok()) FAIL(c.status().ToString());
  return *c;
}

std::vector<int32_t> Allowed(const GrammarMatcher& m) {
  TokenBitmask mask;
  m.FillNextTokenMask(&mask);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < mask.size(); ++id) {
    if (mask.Test(id)) ids.push_back(id);
  }
  return ids;
}

TEST_CASE("matcher: a token may end inside a UTF-8 character", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  GrammarMatcher m(Compile(R"(root ::= [é中]+ "x")", vocab));
  // é whole (7), its first byte (5), and 中's first two bytes (13).
  CHECK(Allowed(m) == std::vector<int32_t>{5, 7, 13});
  REQUIRE(m.AcceptToken(5));                     // "\xC3"
  CHECK(Allowed(m) == std::vector<int32_t>{6});  // only "\xA9" completes it
  CHECK_FALSE(m.AcceptToken(12));
  REQUIRE(m.AcceptToken(6));
  REQUIRE(m.AcceptToken(13));  // "\xE4\xB8"
  CHECK(Allowed(m) == std::vector<int32_t>{14});
  REQUIRE(m.AcceptToken(14));
  CHECK(Allowed(m) == std::vector<int32_t>{5, 7, 12, 13});
  REQUIRE(m.AcceptToken(12));
  CHECK(m.IsTerminated());
  CHECK(Allowed(m) == std::vector<int32_t>{0, 16});  // only EOG
}

TEST_CASE("matcher: token elements match exactly one token", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  // A control token without bytes, then text; <[1]> and <[TOOL]>-style by text both resolve.
  GrammarMatcher m(Compile(R"(root ::= <[1]> "{" "a"* "}" <|im_end|>)", vocab));
  CHECK(Allowed(m) == std::vector<int32_t>{1});
  CHECK_FALSE(m.CanEnd());
  REQUIRE(m.AcceptToken(1));
  CHECK(Allowed(m) == std::vector<int32_t>{8});
  REQUIRE(m.AcceptString("{aa"));
  REQUIRE(m.AcceptToken(9));
  CHECK(Allowed(m) == std::vector<int32_t>{16});  // the EOG token named by the grammar
  REQUIRE(m.AcceptToken(16));
  CHECK(m.CanEnd());
  CHECK(m.IsTerminated());
  CHECK(Allowed(m) == std::vector<int32_t>{0, 16});
  // A token's text never matches a token element, nor a control token the text.
  GrammarMatcher t(Compile(R"(root ::= <[1]> | "x")", vocab));
  CHECK_FALSE(t.AcceptString("[TOOL]"));
  CHECK(Allowed(t) == std::vector<int32_t>{1, 12});
}

TEST_CASE("matcher: negated token elements", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  GrammarMatcher m(Compile(R"(root ::= (!<[12]>)* <[12]>)", vocab));
  // Any token but 12 ("x") and never EOG; then 12.
  std::vector<int32_t> expected;
  for (int32_t id = 1; id < 16; ++id) expected.push_back(id);
  CHECK(Allowed(m) == expected);
  REQUIRE(m.AcceptToken(1));  // a control token counts as "a token other than x"
  REQUIRE(m.AcceptToken(2));
  REQUIRE(m.AcceptToken(12));
  CHECK(m.IsTerminated());
}

TEST_CASE("matcher: EOG only where the grammar can end", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  GrammarMatcher m(Compile(R"(root ::= "a" "b"*)", vocab));
  CHECK_FALSE(m.AcceptToken(0));
  REQUIRE(m.AcceptToken(2));
  CHECK(m.CanEnd());
  CHECK_FALSE(m.IsTerminated());  // more "b" may follow
  CHECK(Allowed(m) == std::vector<int32_t>{0, 3, 16});
  REQUIRE(m.AcceptToken(0));
  CHECK(m.IsTerminated());
  CHECK(Allowed(m).empty());  // nothing after EOG
  CHECK_FALSE(m.AcceptToken(3));
  CHECK_FALSE(m.AcceptString("b"));
}

TEST_CASE("matcher: token element errors at compile", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  auto bad_text = CompiledGrammar::Compile(MustParse("root ::= <|nope|>"), vocab);
  REQUIRE_FALSE(bad_text.ok());
  CHECK(bad_text.status().message() ==
        "token element <|nope|>: no special token of the vocabulary has this text");
  auto bad_id = CompiledGrammar::Compile(MustParse("root ::= <[17]>"), vocab);
  REQUIRE_FALSE(bad_id.ok());
  CHECK(bad_id.status().message() == "token element <[17]>: the vocabulary has 17 tokens");
}

TEST_CASE("matcher: ApplyMask", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  GrammarMatcher m(Compile(R"(root ::= "a" | "ab")", vocab));
  std::vector<float> logits(20, 1.0f);  // padded past the vocabulary
  m.ApplyMask(absl::MakeSpan(logits));
  for (int32_t id = 0; id < 20; ++id) {
    INFO(id);
    CHECK((id == 2 || id == 4) == std::isfinite(logits[id]));
  }
}

TEST_CASE("matcher: strings only without a vocabulary", "[grammar][matcher]") {
  GrammarMatcher m(MustParse(R"(root ::= "ab" [0-9]{2})"));
  CHECK_FALSE(m.AcceptToken(0));
  REQUIRE(m.AcceptString("ab1"));
  CHECK_FALSE(m.CanEnd());
  REQUIRE(m.AcceptString("2"));
  CHECK(m.IsTerminated());
  TokenBitmask mask;
  m.FillNextTokenMask(&mask);
  CHECK(mask.size() == 0);
}

// The state reached by feeding `ids` to a fresh matcher.
GrammarMatcher Replay(const std::shared_ptr<const CompiledGrammar>& c,
                      const std::vector<int32_t>& ids) {
  GrammarMatcher m(c);
  for (int32_t id : ids) REQUIRE(m.AcceptToken(id));
  return m;
}

void CheckSameState(const GrammarMatcher& a, const GrammarMatcher& b) {
  TokenBitmask ma, mb;
  a.FillNextTokenMask(&ma);
  b.FillNextTokenMask(&mb);
  CHECK(ma == mb);
  CHECK(a.CanEnd() == b.CanEnd());
  CHECK(a.IsTerminated() == b.IsTerminated());
  CHECK(a.num_stacks() == b.num_stacks());
  CHECK(a.num_accepted() == b.num_accepted());
}

TEST_CASE("matcher: copies fork and rollback restores", "[grammar][matcher]") {
  const Tokenizer& tok = testing::GgufTokenizer(testing::kStories260K);
  auto c = Compile(testing::kJsonGbnf, GrammarVocab::Create(tok));
  // A walk of at least 12 tokens (random JSON may close its object early).
  GrammarMatcher m(c);
  std::vector<int32_t> ids;
  std::vector<GrammarMatcher> snapshots;
  for (uint32_t seed = 1; ids.size() < 12; ++seed) {
    REQUIRE(seed < 100);
    std::mt19937 rng(seed);
    m = GrammarMatcher(c);
    ids.clear();
    snapshots.clear();
    for (int step = 0; step < 40 && !m.IsTerminated(); ++step) {
      snapshots.push_back(m);  // a fork: must not change when m advances
      std::vector<int32_t> allowed = Allowed(m);
      if (allowed.size() > 1) {  // keep going: no EOG
        allowed.erase(std::remove_if(allowed.begin(), allowed.end(),
                                     [&](int32_t id) { return tok.IsEog(id); }),
                      allowed.end());
      }
      REQUIRE_FALSE(allowed.empty());
      int32_t id = allowed[rng() % allowed.size()];
      REQUIRE(m.AcceptToken(id));
      ids.push_back(id);
    }
  }
  for (size_t i = 0; i < snapshots.size(); ++i) {
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<long>(i));
    CheckSameState(snapshots[i], Replay(c, prefix));
  }
  // Rollback by 1, 3, 7 tokens equals replaying the shorter prefix; advancing again works.
  for (int n : {1, 3, 7}) {
    GrammarMatcher r = m;
    REQUIRE(r.Rollback(n));
    std::vector<int32_t> prefix(ids.begin(), ids.end() - n);
    CheckSameState(r, Replay(c, prefix));
    REQUIRE(r.AcceptToken(ids[ids.size() - n]));
  }
  GrammarMatcher r = m;
  CHECK_FALSE(r.Rollback(static_cast<int>(ids.size()) + 1));
  CheckSameState(r, m);  // unchanged
  REQUIRE(r.Rollback(static_cast<int>(ids.size())));
  CheckSameState(r, GrammarMatcher(c));
  // A refused token changes nothing and is not recorded.
  GrammarMatcher f(c);
  CHECK_FALSE(f.AcceptToken(tok.Encode("]", false)[0]));
  CHECK(f.num_accepted() == 0);
}

// A bounded grammar: every sentence has at most kMaxBytes bytes, and every non-EOG token of the
// vocabulary has at least one byte, so a walk must terminate within kMaxBytes + 1 tokens.
constexpr char kBounded[] = R"(root ::= "{" key ":" ws value ("," ws key ":" ws value){0,3} "}"
key ::= "\"" [a-z]{1,8} "\""
value ::= [0-9]{1,4} | "\"" [a-zA-Z ]{0,12} "\"" | "true" | "false"
ws ::= " "?)";
constexpr int kMaxBytes = 1 + 26 + 3 * 28 + 1;  // "{", first pair, three more, "}"

void WalkToTermination(const std::shared_ptr<const CompiledGrammar>& c, uint32_t seed) {
  std::mt19937 rng(seed);
  GrammarMatcher m(c);
  int steps = 0;
  while (!m.IsTerminated()) {
    REQUIRE(steps <= kMaxBytes + 1);
    std::vector<int32_t> allowed = Allowed(m);
    REQUIRE_FALSE(allowed.empty());
    REQUIRE(m.AcceptToken(allowed[rng() % allowed.size()]));
    ++steps;
  }
  CHECK(m.CanEnd());
}

TEST_CASE("matcher: random walks terminate within the bound", "[grammar][matcher]") {
  auto stories =
      Compile(kBounded, GrammarVocab::Create(testing::GgufTokenizer(testing::kStories260K)));
  for (uint32_t seed = 1; seed <= 20; ++seed) WalkToTermination(stories, seed);
  auto qwen = Compile(kBounded,
                      GrammarVocab::Create(testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf")));
  for (uint32_t seed = 1; seed <= 5; ++seed) WalkToTermination(qwen, seed);
}

TEST_CASE("matcher: GetOrCompile shares one compiled grammar", "[grammar][matcher]") {
  auto vocab = ToyVocab().Make();
  auto a = CompiledGrammar::GetOrCompile("root ::= \"a\"", "root", vocab);
  auto b = CompiledGrammar::GetOrCompile("root ::= \"a\"", "root", vocab);
  auto c = CompiledGrammar::GetOrCompile("root ::= \"b\"", "root", vocab);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(a->get() == b->get());
  CHECK(a->get() != c->get());
  CHECK_FALSE(CompiledGrammar::GetOrCompile("root ::= ", "nope", vocab).ok());
}

}  // namespace grammar_matcher_test
}  // namespace textgen
