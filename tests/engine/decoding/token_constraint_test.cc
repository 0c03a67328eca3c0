// Generation under an output constraint (token_constraint.h), with simple constraints written
// here: only allowed tokens come out, under greedy, sampling and beam search; a complete
// constraint ends the answer (kConstraintComplete); a constraint that allows nothing fails the
// request; beams fork their constraint.
#include "engine/decoding/token_constraint.h"

#include <catch2/catch.hpp>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/model/model.h"
#include "tests/engine/decoding/generation_test_util.h"

namespace textgen {
namespace token_constraint_test {

// Allows only tokens whose id is a multiple of `step` (EOG tokens too, if the multiple rule
// lets them through), forever.
class MultipleOf : public TokenConstraint {
 public:
  explicit MultipleOf(int step) : step_(step) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<MultipleOf>(*this);
  }
  bool Mask(absl::Span<float> logits) const override {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i % step_ != 0) logits[i] = -std::numeric_limits<float>::infinity();
    }
    return true;
  }
  bool Accept(int32_t token) override { return token % step_ == 0; }
  bool Complete() const override { return false; }

 private:
  int step_;
};

// Forces one exact sequence of ids, then is complete.
class Sequence : public TokenConstraint {
 public:
  explicit Sequence(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<Sequence>(*this);
  }
  bool Mask(absl::Span<float> logits) const override {
    if (pos_ >= ids_.size()) return false;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (static_cast<int32_t>(i) != ids_[pos_]) {
        logits[i] = -std::numeric_limits<float>::infinity();
      }
    }
    return true;
  }
  bool Accept(int32_t token) override {
    if (pos_ >= ids_.size() || token != ids_[pos_]) return false;
    ++pos_;
    return true;
  }
  bool Complete() const override { return pos_ == ids_.size(); }

 private:
  std::vector<int32_t> ids_;
  size_t pos_ = 0;
};

// Allows nothing.
class Nothing : public TokenConstraint {
 public:
  std::unique_ptr<TokenConstraint> Clone() const override { return std::make_unique<Nothing>(); }
  bool Mask(absl::Span<float>) const override { return false; }
  bool Accept(int32_t) override { return false; }
  bool Complete() const override { return false; }
};

struct Fixture : testing::ModelWithCache {
  using ModelWithCache::ModelWithCache;
  absl::StatusOr<GenerationResult> Run(const DecodingOptions& o) {
    return Generate(model->lm(), model->tokenizer(), *cache,
                    model->tokenizer().Encode("Once upon a time", true), o);
  }
};

DecodingOptions Methods(int which) {
  DecodingOptions o;
  o.max_new_tokens = 24;
  if (which == 1) {
    o.method = DecodingMethod::kSample;
    o.sampling.temperature = 1.5f;
    o.sampling.seed = 7;
  } else if (which == 2) {
    o.method = DecodingMethod::kBeam;
    o.beam.num_beams = 3;
    o.beam.num_return_sequences = 3;
  }
  return o;
}

TEST_CASE("only the constraint's tokens come out, with every decoding method",
          "[generation][constraint]") {
  Fixture f("stories260K.gguf");
  for (int method = 0; method < 3; ++method) {
    INFO("method " << method);
    DecodingOptions o = Methods(method);
    o.ignore_eos = true;
    auto free_run = f.Run(o);
    REQUIRE(free_run.ok());
    o.constraint = [] { return std::make_unique<MultipleOf>(3); };
    auto r = f.Run(o);
    REQUIRE(r.ok());
    REQUIRE(!r->hypotheses.empty());
    for (const Hypothesis& h : r->hypotheses) {
      CHECK(h.ids.size() == 24u);
      for (int32_t id : h.ids) CHECK(id % 3 == 0);
    }
    // The unconstrained answer is not all multiples of 3, so the mask did something.
    bool all = true;
    for (int32_t id : free_run->hypotheses[0].ids) all = all && id % 3 == 0;
    CHECK_FALSE(all);
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("a complete constraint ends the answer as constraint_complete",
          "[generation][constraint]") {
  Fixture f("stories260K.gguf");
  const std::vector<int32_t> forced = {100, 200, 300, 7};
  for (int method = 0; method < 3; ++method) {
    INFO("method " << method);
    DecodingOptions o = Methods(method);
    o.constraint = [forced] { return std::make_unique<Sequence>(forced); };
    auto r = f.Run(o);
    REQUIRE(r.ok());
    CHECK(r->finish_reason == FinishReason::kConstraintComplete);
    CHECK(r->hypotheses[0].ids == forced);
    CHECK(r->hypotheses[0].finish_reason == FinishReason::kConstraintComplete);
  }
}

TEST_CASE("a constraint that allows no token fails the request", "[generation][constraint]") {
  Fixture f("stories260K.gguf");
  for (int method = 0; method < 3; ++method) {
    DecodingOptions o = Methods(method);
    o.constraint = [] { return std::make_unique<Nothing>(); };
    auto r = f.Run(o);
    CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("allows no token"));
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("shown special tokens appear in the output text", "[generation][constraint]") {
  Fixture f("stories260K.gguf");
  const Tokenizer& tok = f.model->tokenizer();
  const int32_t eos = tok.eos_id();  // a control token: no bytes of its own
  REQUIRE(tok.IsControl(eos));
  DecodingOptions o;
  o.max_new_tokens = 3;
  o.ignore_eos = true;
  const std::vector<int32_t> forced = {eos, 300, eos};
  o.constraint = [forced] { return std::make_unique<Sequence>(forced); };
  auto hidden = f.Run(o);
  REQUIRE(hidden.ok());
  o.shown_special_tokens = {eos};
  auto shown = f.Run(o);
  REQUIRE(shown.ok());
  const std::string eos_text(tok.TokenText(eos));
  CHECK(shown->hypotheses[0].text == eos_text + tok.Decode({300}) + eos_text);
  CHECK(hidden->hypotheses[0].text == tok.Decode({300}));
}

}  // namespace token_constraint_test
}  // namespace textgen
