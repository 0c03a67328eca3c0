// SingleChooser on hand-made logits rows: the argmax and its logprob under the model's own
// distribution, top logprobs, the end rules (EOS, max_new_tokens, a complete constraint), the
// repetition penalty's context, a constraint's mask, seeded sampling, and the result.
#include "engine/decoding/single_chooser.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/engine/decoding/toy_vocab_test_util.h"

namespace textgen {
namespace single_chooser_test {

using namespace toy_vocab;  // NOLINT: the toy ids

// A row [kVocab] of `base` with the given (id, logit) entries.
std::vector<float> Row(std::vector<std::pair<int32_t, float>> set, float base = 0) {
  std::vector<float> r(kVocab, base);
  for (auto [id, v] : set) r[id] = v;
  return r;
}

double LogSoftmaxAt(const std::vector<float>& row, int32_t id) {
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v));
  return row[id] - std::log(sum);
}

DecodingOptions Greedy(int max_new = 8) {
  DecodingOptions o;
  o.max_new_tokens = max_new;
  return o;
}

TEST_CASE("single chooser: greedy takes the argmax with its logprob and top alternatives",
          "[single_chooser]") {
  DecodingOptions o = Greedy();
  o.top_logprobs = 2;
  SingleChooser c(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
  const std::vector<float> row = Row({{kB, 3}, {kC, 2}, {kA, 1}});
  auto choice = c.Choose(row.data());
  REQUIRE(choice.ok());
  CHECK_FALSE(choice->end.has_value());
  REQUIRE(choice->next.size() == 1);
  CHECK(choice->next[0].parent == 0);
  CHECK(choice->next[0].token == kB);
  std::vector<GeneratedToken> certain = c.TakeCertain();
  REQUIRE(certain.size() == 1);
  CHECK(certain[0].id == kB);
  CHECK(certain[0].logprob == Approx(LogSoftmaxAt(row, kB)));
  REQUIRE(certain[0].top.size() == 2);
  CHECK(certain[0].top[0].id == kB);
  CHECK(certain[0].top[1].id == kC);
  CHECK(c.TakeCertain().empty());  // each token is taken once
  CHECK(c.answer_ids() == std::vector<int32_t>{kB});
}

TEST_CASE("single chooser: the answer ends on EOS, unless ignored, and at max_new_tokens",
          "[single_chooser]") {
  const std::vector<float> eos = Row({{kEos, 5}});
  SingleChooser a(ToyTokenizer(), Greedy(), kVocab, {kBos}, nullptr);
  auto ca = a.Choose(eos.data());
  REQUIRE(ca.ok());
  CHECK(ca->end == FinishReason::kEos);
  CHECK(ca->next.empty());
  CHECK(a.End().size() == 1);  // the EOS token, not taken yet

  DecodingOptions o = Greedy(2);
  o.ignore_eos = true;
  SingleChooser b(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
  auto c1 = b.Choose(eos.data());
  REQUIRE(c1.ok());
  CHECK_FALSE(c1->end.has_value());
  auto c2 = b.Choose(eos.data());
  REQUIRE(c2.ok());
  CHECK(c2->end == FinishReason::kLength);
  CHECK(b.answer_ids() == std::vector<int32_t>{kEos, kEos});
}

TEST_CASE("single chooser: the repetition penalty sees the prompt and the answer",
          "[single_chooser]") {
  DecodingOptions o = Greedy();
  o.sampling.repetition_penalty = 4;
  const std::vector<float> row = Row({{kA, 2}, {kB, 1}});
  SingleChooser fresh(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
  CHECK(fresh.Choose(row.data())->next[0].token == kA);
  CHECK(fresh.Choose(row.data())->next[0].token == kB);  // kA is in the context now: 2/4 < 1
  SingleChooser prompted(ToyTokenizer(), o, kVocab, {kBos, kA}, nullptr);
  auto c = prompted.Choose(row.data());
  CHECK(c->next[0].token == kB);
  // The logprob is the model's, not the penalised one.
  CHECK(prompted.TakeCertain()[0].logprob == Approx(LogSoftmaxAt(row, kB)));
}

TEST_CASE("single chooser: a constraint decides among allowed tokens and can end the answer",
          "[single_chooser]") {
  const std::vector<float> row = Row({{kA, 5}, {kD, -1}});
  SingleChooser c(ToyTokenizer(), Greedy(), kVocab, {kBos}, std::make_unique<OnlyToken>(kD));
  auto choice = c.Choose(row.data());
  REQUIRE(choice.ok());
  CHECK(c.answer_ids() == std::vector<int32_t>{kD});
  CHECK(choice->end == FinishReason::kConstraintComplete);
  CHECK(c.TakeCertain()[0].logprob == Approx(LogSoftmaxAt(row, kD)));

  SingleChooser none(ToyTokenizer(), Greedy(), kVocab, {kBos}, std::make_unique<OnlyToken>(-1));
  auto refused = none.Choose(row.data());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("single chooser: seeded sampling repeats itself", "[single_chooser]") {
  DecodingOptions o = Greedy(20);
  o.method = DecodingMethod::kSample;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 7;
  const std::vector<float> row = Row({{kA, 1}, {kB, 1}, {kC, 1}, {kD, 1}}, -50);
  std::vector<std::vector<int32_t>> runs;
  for (int run = 0; run < 2; ++run) {
    SingleChooser c(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
    for (int i = 0; i < 20; ++i) REQUIRE(c.Choose(row.data()).ok());
    runs.push_back(c.answer_ids());
  }
  CHECK(runs[0] == runs[1]);
  // Four equally likely tokens: 20 draws that all agree would be a greedy chooser.
  bool varied = false;
  for (int32_t id : runs[0]) varied = varied || id != runs[0][0];
  CHECK(varied);
}

TEST_CASE("single chooser: the hypothesis is the streamed text with the answer's logprobs",
          "[single_chooser]") {
  SingleChooser c(ToyTokenizer(), Greedy(2), kVocab, {kBos}, nullptr);
  const std::vector<float> row = Row({{kA, 1}});
  REQUIRE(c.Choose(row.data()).ok());
  REQUIRE(c.Choose(row.data()).ok());
  c.End();
  std::vector<Hypothesis> h = c.Results(FinishReason::kLength, "aa");
  REQUIRE(h.size() == 1);
  CHECK(h[0].text == "aa");
  CHECK(h[0].ids == std::vector<int32_t>{kA, kA});
  CHECK(h[0].cum_logprob == Approx(2 * LogSoftmaxAt(row, kA)));
  CHECK(h[0].score == h[0].cum_logprob);
  CHECK(h[0].finish_reason == FinishReason::kLength);
}

}  // namespace single_chooser_test
}  // namespace textgen
