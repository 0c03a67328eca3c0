// The fast masks (mask cache + run-time checks) against the definition: a token is allowed iff
// AcceptToken on a copy of the matcher succeeds, for every token of real vocabularies.
#include <catch2/catch.hpp>
#include <random>
#include <string>
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
    if (static_cast<int>(i) % stride == 0) CheckMask(m, "before token " + std::to_string(i));
    TokenBitmask mask;
    m.FillNextTokenMask(&mask);
    REQUIRE(mask.Test(ids[i]));
    REQUIRE(m.AcceptToken(ids[i]));
  }
  CHECK(m.CanEnd());
  CheckMask(m, "at the end");
}

// Picks random allowed tokens (as a model with noise weights would), checking every mask.
void RandomWalk(const std::shared_ptr<const CompiledGrammar>& compiled, uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  GrammarMatcher m(compiled);
  for (int step = 0; step < steps && !m.IsTerminated(); ++step) {
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

TEST_CASE("masks: schema grammar along documents, Qwen3 vocabulary", "[grammar][mask][slow]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
  auto compiled = Compile(testing::kPersonSchemaGbnf, GrammarVocab::Create(tok));
  CheckAlongDocument(compiled, tok, testing::kPersonDocs[0], 5);
  CheckAlongDocument(compiled, tok, testing::kPersonDocs[3], 7);
}

TEST_CASE("masks: free JSON along documents, Llama 3.1 vocabulary", "[grammar][mask][slow]") {
  const Tokenizer& tok = testing::GgufTokenizer("vocab/ggml-vocab-llama3.1.gguf");
  auto compiled = Compile(testing::kJsonGbnf, GrammarVocab::Create(tok));
  CheckAlongDocument(compiled, tok, testing::kJsonDocs[0], 6);
  CheckAlongDocument(compiled, tok, testing::kJsonDocs[1], 9);
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
  RandomWalk(compiled, 7, 12);
  auto json = Compile(testing::kJsonGbnf, vocab);
  RandomWalk(json, 8, 12);
}

}  // namespace grammar_mask_test
}  // namespace textgen
