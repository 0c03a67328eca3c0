// BeamChooser on hand-made logits rows: the same choices as BeamSearch over the rows'
// log-softmax, stop strings and complete constraints as terminal candidates (with their finish
// reasons and cut text), the certain prefix handed out once, and an early end.
#include "engine/decoding/beam_chooser.h"

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/softmax.h"
#include "tests/engine/decoding/toy_vocab_test_util.h"

namespace textgen {
namespace beam_chooser_test {

using namespace toy_vocab;  // NOLINT: the toy ids

DecodingOptions Beams(int beams, int max_new, EarlyStopping es = EarlyStopping::kHeuristic) {
  DecodingOptions o;
  o.method = DecodingMethod::kBeam;
  o.max_new_tokens = max_new;
  o.beam.num_beams = beams;
  o.beam.num_return_sequences = beams;
  o.beam.early_stopping = es;
  return o;
}

// A toy model's logits [kVocab] after `ids`: pseudo-random, a function of the history.
std::vector<float> ToyLogits(const std::vector<int32_t>& ids) {
  uint32_t h = 2166136261u;
  for (int32_t id : ids) h = (h ^ static_cast<uint32_t>(id)) * 16777619u;
  std::mt19937 rng(h);
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<float> row(kVocab);
  for (float& v : row) v = u(rng);
  return row;
}

// A row [kVocab] of -5 with the given (id, logit) entries.
std::vector<float> Row(std::vector<std::pair<int32_t, float>> set) {
  std::vector<float> r(kVocab, -5);
  for (auto [id, v] : set) r[id] = v;
  return r;
}

TEST_CASE("beam chooser: chooses as BeamSearch over the rows' log-softmax", "[beam_chooser]") {
  for (EarlyStopping es : {EarlyStopping::kHeuristic, EarlyStopping::kEarly}) {
    const DecodingOptions o = Beams(3, 6, es);
    BeamChooser chooser(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
    BeamSearchOptions bo = o.beam;
    bo.max_new_tokens = o.max_new_tokens;
    bo.eos_id = kEos;
    bo.eog_ids = ToyTokenizer().eog_ids();
    BeamSearch search(bo);
    std::vector<std::vector<int32_t>> live = {{}};  // the caller's view of each live sequence
    std::vector<int32_t> certain;
    for (int step = 0; !search.done(); ++step) {
      REQUIRE(step < 6);
      std::vector<float> logits;
      std::vector<double> rows(live.size() * kVocab);
      for (size_t i = 0; i < live.size(); ++i) {
        const std::vector<float> row = ToyLogits(live[i]);
        logits.insert(logits.end(), row.begin(), row.end());
        ops::LogSoftmax(row.data(), kVocab, &rows[i * kVocab]);
      }
      std::vector<const double*> ptrs;
      for (size_t i = 0; i < live.size(); ++i) ptrs.push_back(&rows[i * kVocab]);
      const std::vector<BeamChoice> want = search.Step(ptrs, kVocab);
      auto got = chooser.Choose(logits.data());
      REQUIRE(got.ok());
      REQUIRE(got->next.size() == want.size());
      for (size_t j = 0; j < want.size(); ++j) {
        CHECK(got->next[j].parent == want[j].parent);
        CHECK(got->next[j].token == want[j].token);
      }
      CHECK(got->end.has_value() == search.done());
      for (const GeneratedToken& t : chooser.TakeCertain()) certain.push_back(t.id);
      std::vector<std::vector<int32_t>> next;
      for (const BeamChoice& c : got->next) {
        next.push_back(live[c.parent]);
        next.back().push_back(c.token);
      }
      live = std::move(next);
    }
    for (const GeneratedToken& t : chooser.End()) certain.push_back(t.id);
    const std::vector<BeamHypothesis> want = search.Results();
    const std::vector<Hypothesis> got = chooser.Results(FinishReason::kLength, "");
    REQUIRE(got.size() == want.size());
    CHECK(certain == want[0].ids);  // the stream's tokens are the best hypothesis
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].ids == want[i].ids);
      CHECK(got[i].score == want[i].score);
      CHECK(got[i].finish_reason == (want[i].eos ? FinishReason::kEos : FinishReason::kLength));
    }
  }
}

TEST_CASE("beam chooser: a candidate completing a stop string ends its hypothesis, cut",
          "[beam_chooser]") {
  DecodingOptions o = Beams(1, 8, EarlyStopping::kEarly);
  o.stop = {"bc"};
  BeamChooser c(ToyTokenizer(), o, kVocab, {kBos}, nullptr);
  const std::vector<float> first = Row({{kA, 3}, {kB, 1}});
  auto s1 = c.Choose(first.data());
  REQUIRE(s1.ok());
  REQUIRE(s1->next.size() == 1);
  CHECK(s1->next[0].token == kA);
  const std::vector<GeneratedToken> certain = c.TakeCertain();
  REQUIRE(certain.size() == 1);  // one beam: its tokens are certain at once
  CHECK(certain[0].id == kA);
  // "a" + "bc" contains the stop: the best candidate is terminal and the search (one beam,
  // early stopping) is over.
  const std::vector<float> second = Row({{kBC, 3}, {kD, 1}});
  auto s2 = c.Choose(second.data());
  REQUIRE(s2.ok());
  CHECK(s2->next.empty());
  CHECK(s2->end == FinishReason::kStopSequence);
  CHECK(c.TakeCertain().empty());  // the rest comes with End
  const std::vector<GeneratedToken> rest = c.End();
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].id == kBC);
  CHECK(c.answer_ids() == std::vector<int32_t>{kA, kBC});
  const std::vector<Hypothesis> h = c.Results(FinishReason::kStopSequence, "");
  REQUIRE(h.size() == 1);
  CHECK(h[0].text == "a");
  CHECK(h[0].finish_reason == FinishReason::kStopSequence);
}

TEST_CASE("beam chooser: a candidate completing its constraint ends its hypothesis",
          "[beam_chooser]") {
  BeamChooser c(ToyTokenizer(), Beams(2, 8), kVocab, {kBos}, std::make_unique<OnlyToken>(kD));
  const std::vector<float> row = Row({{kA, 3}, {kD, 1}});
  auto s = c.Choose(row.data());
  REQUIRE(s.ok());
  REQUIRE(s->end.has_value());
  CHECK(*s->end == FinishReason::kConstraintComplete);
  c.End();
  const std::vector<Hypothesis> h = c.Results(*s->end, "");
  REQUIRE_FALSE(h.empty());
  CHECK(h[0].ids == std::vector<int32_t>{kD});
  CHECK(h[0].text == "d");
  CHECK(h[0].finish_reason == FinishReason::kConstraintComplete);
}

TEST_CASE("beam chooser: ended early, the running beams are the hypotheses, best first",
          "[beam_chooser]") {
  BeamChooser c(ToyTokenizer(), Beams(3, 8), kVocab, {kBos}, nullptr);
  const std::vector<float> row = Row({{kA, 1}, {kB, 3}, {kC, 2}});
  auto s = c.Choose(row.data());
  REQUIRE(s.ok());
  CHECK_FALSE(s->end.has_value());
  CHECK(c.TakeCertain().empty());  // three different beams: nothing certain yet
  const std::vector<GeneratedToken> rest = c.End();
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].id == kB);
  const std::vector<Hypothesis> h = c.Results(FinishReason::kCancelled, "");
  REQUIRE(h.size() == 3);
  CHECK(h[0].ids == std::vector<int32_t>{kB});
  CHECK(h[1].ids == std::vector<int32_t>{kC});
  CHECK(h[2].ids == std::vector<int32_t>{kA});
  CHECK(h[0].score >= h[1].score);
  for (const Hypothesis& x : h) CHECK(x.finish_reason == FinishReason::kCancelled);
}

}  // namespace beam_chooser_test
}  // namespace textgen
