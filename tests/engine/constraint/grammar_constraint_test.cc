// Grammar constraints driving real generations (stories260K): the answer is a sentence of the
// grammar under greedy, sampling and beam search and ends as constraint_complete; a triggered
// grammar leaves the text free until its trigger and constrains it from there.
#include "engine/constraint/grammar_constraint.h"

#include <catch2/catch.hpp>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar_vocab.h"
#include "engine/model/model.h"
#include "tests/engine/decoding/generation_test_util.h"

namespace textgen {
namespace grammar_constraint_test {

struct Fixture : testing::ModelWithCache {
  Fixture() : ModelWithCache("stories260K.gguf"), vocab(GrammarVocab::Create(model->tokenizer())) {}
  std::shared_ptr<const CompiledGrammar> Compile(std::string_view gbnf) {
    auto g = CompiledGrammar::GetOrCompile(gbnf, "root", vocab);
    REQUIRE(g.ok());
    return *g;
  }
  absl::StatusOr<GenerationResult> Run(const DecodingOptions& o,
                                       const std::string& prompt = "Once upon a time") {
    return Generate(model->lm(), model->tokenizer(), *cache,
                    model->tokenizer().Encode(prompt, true), o);
  }
  std::shared_ptr<const GrammarVocab> vocab;
};

DecodingOptions Method(int which, int max_new = 40) {
  DecodingOptions o;
  o.max_new_tokens = max_new;
  if (which == 1) {
    o.method = DecodingMethod::kSample;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 11;
  } else if (which == 2) {
    o.method = DecodingMethod::kBeam;
    o.beam.num_beams = 3;
    o.beam.num_return_sequences = 2;
  }
  return o;
}

TEST_CASE("a grammar-constrained answer is a sentence of the grammar, with every method",
          "[constraint][grammar]") {
  Fixture f;
  // Bounded: every sentence ends within the token budget, so each run completes.
  const auto grammar = f.Compile(R"(root ::= " " name " had " count " " thing "."
name ::= "Lily" | "Tom" | "Ben"
count ::= [1-9]
thing ::= "cats" | "dogs" | "red balls")");
  const std::regex sentence(R"( (Lily|Tom|Ben) had [1-9] (cats|dogs|red balls)\.)");
  for (int method = 0; method < 3; ++method) {
    INFO("method " << method);
    DecodingOptions o = Method(method);
    o.constraint = [grammar] { return std::make_unique<GrammarConstraint>(grammar); };
    auto r = f.Run(o);
    REQUIRE(r.ok());
    CHECK(r->finish_reason == FinishReason::kConstraintComplete);
    for (const Hypothesis& h : r->hypotheses) {
      INFO(h.text);
      CHECK(std::regex_match(h.text, sentence));
      CHECK(h.finish_reason == FinishReason::kConstraintComplete);
    }
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("a triggered grammar leaves the text free until its trigger", "[constraint][grammar]") {
  Fixture f;
  const Tokenizer& tok = f.model->tokenizer();
  const auto grammar = f.Compile(R"(root ::= "Lily" " had " [1-9] " cats.")");
  DecodingOptions o = Method(0, 80);
  o.constraint = [grammar, &tok] {
    return std::make_unique<TriggeredConstraint>(grammar,
                                                 std::vector<ConstraintTrigger>{{"Lily", false}},
                                                 [&tok](int32_t id) { return tok.TokenBytes(id); });
  };
  auto free_run = f.Run(Method(0, 80));
  auto r = f.Run(o);
  REQUIRE(free_run.ok());
  REQUIRE(r.ok());
  const std::string& free_text = free_run->hypotheses[0].text;
  const std::string& text = r->hypotheses[0].text;
  INFO(free_text << "\n---\n" << text);
  const size_t at = free_text.find("Lily");
  REQUIRE(at != std::string::npos);  // the story names Lily: the trigger comes
  // Up to the trigger the answer is the free one; from it, the grammar's sentence, then done.
  CHECK(text.substr(0, at) == free_text.substr(0, at));
  CHECK(std::regex_match(text.substr(at), std::regex(R"(Lily had [1-9] cats\.)")));
  CHECK(r->finish_reason == FinishReason::kConstraintComplete);

  // A trigger that never comes: the answer is the free one.
  o.constraint = [grammar, &tok] {
    return std::make_unique<TriggeredConstraint>(grammar,
                                                 std::vector<ConstraintTrigger>{{"Zebra", false}},
                                                 [&tok](int32_t id) { return tok.TokenBytes(id); });
  };
  auto untriggered = f.Run(o);
  REQUIRE(untriggered.ok());
  CHECK(untriggered->hypotheses[0].ids == free_run->hypotheses[0].ids);
}

TEST_CASE("ApplyTokenBitmask keeps exactly the allowed logits", "[constraint][grammar]") {
  std::mt19937_64 rng(7);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  // Sizes around word edges; logits longer than the mask (padded rows) and shorter; masks
  // empty, full, sparse, dense.
  for (int mask_size : {1, 63, 64, 65, 200, 1000}) {
    for (int extra : {-1, 0, 1, 70}) {
      const int n = std::max(1, mask_size + extra);
      for (int density : {0, 1, 50, 99, 100}) {
        INFO("mask " << mask_size << ", logits " << n << ", density " << density);
        TokenBitmask mask(mask_size);
        for (int id = 0; id < mask_size; ++id) {
          if (static_cast<int>(rng() % 100) < density) mask.Set(id);
        }
        std::vector<float> logits(n);
        for (int i = 0; i < n; ++i) logits[i] = static_cast<float>(i) + 0.5f;
        const bool any = ApplyTokenBitmask(mask, absl::MakeSpan(logits));
        bool expect_any = false;
        for (int i = 0; i < n; ++i) {
          const bool allowed = i < mask_size && mask.Test(i);
          expect_any = expect_any || allowed;
          if (allowed != (logits[i] != kNegInf)) FAIL("id " << i);
          if (allowed) CHECK(logits[i] == static_cast<float>(i) + 0.5f);
        }
        CHECK(any == expect_any);
      }
    }
  }
}

}  // namespace grammar_constraint_test
}  // namespace textgen
