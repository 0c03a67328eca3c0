// Beam search core: hand-computed toy models for every early-stopping mode × length penalty,
// ties, validation, tiny vocabularies. The randomized comparison with an independent
// re-implementation is in beam_search_random_test.cc.
#include "engine/decoding/beam_search.h"

#include <catch2/catch.hpp>

#include "tests/engine/decoding/beam_search_test_util.h"

namespace textgen {
namespace beam_search_test {

using namespace beam_testing;  // NOLINT: test vocabulary

struct Want {
  std::vector<int32_t> ids;
  double score;
  bool eos;
};

void CheckResults(const std::vector<BeamHypothesis>& got, const std::vector<Want>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("result " << i);
    CHECK(got[i].ids == want[i].ids);
    CHECK(got[i].score == Approx(want[i].score).margin(1e-12));
    CHECK(got[i].eos == want[i].eos);
  }
}

struct HandCase {
  EarlyStopping mode;
  float alpha;
  int steps;
  std::vector<Want> results;
};

// ---------------------------------------------------------------------------------------------
// Scenario 1: EARLY stops with a worse set that HEURISTIC / NEVER improve on (α = 1, 2).
// B = 2, max_new_tokens = 5, vocabulary {E=0, a=1, b=2, c=3}.
//   prompt: a -0.5, b -1.0, E -3, c -3
//   after a: c -0.5, E -0.75, a -5, b -5
//   after b: E -1.0, c -2.0, a -5, b -5
//   after c: c -0.5, E -1.5,  a -5, b -5
// Step 1 (one beam, cum 0): a -0.5 (r0), b -1.0 (r1) -> running [a -0.5, b -1.0]; two running
//   beams chosen, so the walk stops before E (r2; ties with c at -3, lower id first).
// Step 2: ac -1.0 (r0 run), aE -1.25 (r1 -> finished, len 2), bE -2.0 (r2: EOS with rank >= B,
//   dropped), bc -3.0 (r3 run) -> running [ac -1.0, bc -3.0], finished {aE}.
// Step 3: acc -1.5 (r0 run), acE -2.5 (r1 -> finished, len 3), bcc -3.5 (r2 run) -> stop walking.
// Step 4: accc -2.0 run, accE -3.0 offered (len 4), bccc -4.0 run.
// Step 5: acccc -2.5 run, acccE -3.5 offered (len 5), bcccc -4.5 run; then rule 4 offers
//   acccc -2.5 and bcccc -4.5 at len 5 unless done.
// Scores cum/len^α:     α=0     α=1       α=2
//   aE    -1.25 / 2    -1.25   -0.625    -0.3125
//   acE   -2.5  / 3    -2.5    -0.8333   -0.27778
//   accE  -3.0  / 4    -3.0    -0.75     -0.1875
//   acccE -3.5  / 5    -3.5    -0.7      -0.14
//   acccc -2.5  / 5    -2.5    -0.5      -0.1     (length)
//   bcccc -4.5  / 5    -4.5    -0.9      -0.18    (length)
// EARLY: the set is full after step 3 -> done with {aE, acE}.
// HEURISTIC α=0: step 3 best running -1.5 > worst -2.5; step 4 accE -3 rejected, -2.0 > -2.5;
//   step 5 acccE -3.5 rejected, best running -2.5 <= -2.5 -> done by rule 3: {aE, acE}.
// HEURISTIC α=1: step 3 -1.5/3=-0.5 > -0.8333; step 4 accE -0.75 evicts acE, -2/4=-0.5 > -0.75;
//   step 5 acccE -0.7 evicts accE, -2.5/5=-0.5 > -0.7 -> rule 4: acccc -0.5 evicts acccE, bcccc
//   -0.9 < -0.625 rejected -> [acccc -0.5, aE -0.625].
// HEURISTIC α=2: step 3 -1.5/9=-0.1667 > -0.3125 (aE); step 4 accE -0.1875 evicts aE,
//   -2/16=-0.125 > -0.2778; step 5 acccE -0.14 evicts acE, -2.5/25=-0.1 > -0.1875 -> rule 4:
//   acccc -0.1 evicts accE, bcccc -0.18 < -0.14 rejected -> [acccc -0.1, acccE -0.14].
// NEVER: α=0 as HEURISTIC; α>0 bounds with /5^α, never tighter than HEURISTIC which already ran
//   to the limit -> same as HEURISTIC.
ToyModel Scenario1() {
  return LastTokenModel({{-1, {-3, -0.5, -1.0, -3}},
                         {A, {-0.75, -5, -5, -0.5}},
                         {Bt, {-1.0, -5, -5, -2.0}},
                         {C, {-1.5, -5, -5, -0.5}}});
}

TEST_CASE("beam_search: scenario 1, EARLY stops early, HEURISTIC/NEVER improve", "[beam]") {
  const std::vector<int32_t> aE{A, E}, acE{A, C, E}, acccE{A, C, C, C, E}, acccc{A, C, C, C, C};
  const std::vector<HandCase> cases = {
      {EarlyStopping::kEarly, 0, 3, {{aE, -1.25, true}, {acE, -2.5, true}}},
      {EarlyStopping::kEarly, 1, 3, {{aE, -0.625, true}, {acE, -2.5 / 3, true}}},
      {EarlyStopping::kEarly, 2, 3, {{acE, -2.5 / 9, true}, {aE, -0.3125, true}}},
      {EarlyStopping::kHeuristic, 0, 5, {{aE, -1.25, true}, {acE, -2.5, true}}},
      {EarlyStopping::kHeuristic, 1, 5, {{acccc, -0.5, false}, {aE, -0.625, true}}},
      {EarlyStopping::kHeuristic, 2, 5, {{acccc, -0.1, false}, {acccE, -0.14, true}}},
      {EarlyStopping::kNever, 0, 5, {{aE, -1.25, true}, {acE, -2.5, true}}},
      {EarlyStopping::kNever, 1, 5, {{acccc, -0.5, false}, {aE, -0.625, true}}},
      {EarlyStopping::kNever, 2, 5, {{acccc, -0.1, false}, {acccE, -0.14, true}}},
  };
  for (const HandCase& hc : cases) {
    INFO("mode " << EarlyStoppingName(hc.mode) << " alpha " << hc.alpha);
    BeamSearchOptions o;
    o.num_beams = 2;
    o.num_return_sequences = 2;
    o.max_new_tokens = 5;
    o.eos_id = E;
    o.early_stopping = hc.mode;
    o.length_penalty = hc.alpha;
    Run run = Drive(o, Scenario1(), 4);
    CHECK(run.steps == hc.steps);
    CheckResults(run.results, hc.results);
    // The running beams of steps 1-2 (same for every mode).
    REQUIRE(run.choices.size() >= 3);
    CHECK(run.choices[0][0].token == A);
    CHECK(run.choices[0][1].token == Bt);
    CHECK(run.choices[1][0].parent == 0);
    CHECK(run.choices[1][0].token == C);
    CHECK(run.choices[1][1].parent == 1);
    CHECK(run.choices[1][1].token == C);
    // Certain: nothing after step 1 (a vs b); after step 2 still {ac, bc, aE}; from step 3 the
    // b-beam survives, so only the final answer pins it down.
    CHECK(run.prefixes[0].empty());
    CHECK(run.prefixes[1].empty());
  }
}

TEST_CASE("beam_search: EOS ranked >= num_beams is dropped", "[beam]") {
  // Scenario 1 step 2: bE -2.0 has rank 2 with B = 2, so only aE is finished. Were bE kept,
  // the set would be full after step 2 and EARLY would stop there with {aE, bE}.
  BeamSearchOptions o;
  o.num_beams = 2;
  o.max_new_tokens = 5;
  o.eos_id = E;
  o.early_stopping = EarlyStopping::kEarly;
  BeamSearch bs(o);
  ToyModel m = Scenario1();
  auto step = [&] {
    std::vector<Row> rows;
    for (int i = 0; i < bs.num_live(); ++i) rows.push_back(m(bs.running_ids(i)));
    std::vector<const double*> ptrs;
    for (const Row& r : rows) ptrs.push_back(r.data());
    return bs.Step(ptrs, 4);
  };
  step();
  step();
  REQUIRE(!bs.done());
  REQUIRE(bs.num_live() == 2);
  CHECK(bs.running_ids(0) == std::vector<int32_t>{A, C});
  CHECK(bs.running_cum_logprob(0) == -1.0);
  CHECK(bs.running_ids(1) == std::vector<int32_t>{Bt, C});
  CHECK(bs.running_cum_logprob(1) == -3.0);
  std::vector<BeamHypothesis> fin = bs.Finished();
  REQUIRE(fin.size() == 1);
  CHECK(fin[0].ids == std::vector<int32_t>{A, E});
  CHECK(fin[0].logprobs == std::vector<double>{-0.5, -0.75});
  // Certain prefix: LCP of ac, bc, aE = [].
  CHECK(bs.CertainPrefix().empty());
}

// ---------------------------------------------------------------------------------------------
// Scenario 2: NEVER continues where HEURISTIC stops (α > 0).
// B = 2, max_new_tokens = 4, vocabulary {E=0, a=1, b=2, c=3}.
//   prompt: a -1, b -2, E -3, c -4
//   after a: E -0.5,   c -2, a -6, b -6
//   after b: E -0.125, c -2, a -6, b -6
//   after c: E -1,     c -0.0625, a -6, b -6
// Step 1: a -1 (r0), b -2 (r1) -> running [a, b].
// Step 2: aE -1.5 (r0 fin), bE -2.125 (r1 fin), ac -3 (r2 run), bc -4 (r3 run); set full.
// Step 3: acc -3.0625 run, acE -4 offered (len 3), bcc -4.0625 run.
// Step 4: accc -3.125 run, accE -4.0625 offered (len 4), bccc -4.125 run; rule 4 offers accc
//   -3.125 and bccc -4.125 at len 4 unless done.
// Scores cum/len^α:     α=0      α=1        α=2
//   aE   -1.5    / 2    -1.5     -0.75      -0.375
//   bE   -2.125  / 2    -2.125   -1.0625    -0.53125
//   acE  -4      / 3    -4       -1.33333   -0.44444
//   accE -4.0625 / 4    -4.0625  -1.015625  -0.25390625
//   accc -3.125  / 4    -3.125   -0.78125   -0.1953125 (length)
//   bccc -4.125  / 4    -4.125   -1.03125   -0.2578125 (length)
// EARLY: done after step 2 with [aE, bE].
// HEURISTIC after step 2, best running ac -3 at len 2: α=0 -3 <= -2.125; α=1 -1.5 <= -1.0625;
//   α=2 -0.75 <= -0.53125 -> done with [aE, bE] for every α.
// NEVER α=0: as HEURISTIC.
// NEVER α=1, bound /4: step 2 -0.75 > -1.0625; step 3 acE -1.333 rejected, -3.0625/4 = -0.7656
//   > -1.0625; step 4 accE -1.015625 evicts bE, -3.125/4 = -0.78125 > -1.015625 -> rule 4: accc
//   -0.78125 evicts accE, bccc -1.03125 rejected -> [aE -0.75, accc -0.78125].
// NEVER α=2, bound /16: step 2 -0.1875 > -0.53125; step 3 acE -0.4444 evicts bE, -0.1914 >
//   -0.4444; step 4 accE -0.2539 evicts acE, -0.1953 > -0.375 -> rule 4: accc -0.1953 evicts aE,
//   bccc -0.2578 < -0.2539 rejected -> [accc -0.1953125, accE -0.25390625].
ToyModel Scenario2() {
  return LastTokenModel({{-1, {-3, -1, -2, -4}},
                         {A, {-0.5, -6, -6, -2}},
                         {Bt, {-0.125, -6, -6, -2}},
                         {C, {-1, -6, -6, -0.0625}}});
}

TEST_CASE("beam_search: scenario 2, NEVER continues where HEURISTIC stops", "[beam]") {
  const std::vector<int32_t> aE{A, E}, bE{Bt, E}, accE{A, C, C, E}, accc{A, C, C, C};
  const std::vector<HandCase> cases = {
      {EarlyStopping::kEarly, 0, 2, {{aE, -1.5, true}, {bE, -2.125, true}}},
      {EarlyStopping::kEarly, 1, 2, {{aE, -0.75, true}, {bE, -1.0625, true}}},
      {EarlyStopping::kEarly, 2, 2, {{aE, -0.375, true}, {bE, -0.53125, true}}},
      {EarlyStopping::kHeuristic, 0, 2, {{aE, -1.5, true}, {bE, -2.125, true}}},
      {EarlyStopping::kHeuristic, 1, 2, {{aE, -0.75, true}, {bE, -1.0625, true}}},
      {EarlyStopping::kHeuristic, 2, 2, {{aE, -0.375, true}, {bE, -0.53125, true}}},
      {EarlyStopping::kNever, 0, 2, {{aE, -1.5, true}, {bE, -2.125, true}}},
      {EarlyStopping::kNever, 1, 4, {{aE, -0.75, true}, {accc, -0.78125, false}}},
      {EarlyStopping::kNever, 2, 4, {{accc, -0.1953125, false}, {accE, -0.25390625, true}}},
  };
  for (const HandCase& hc : cases) {
    INFO("mode " << EarlyStoppingName(hc.mode) << " alpha " << hc.alpha);
    BeamSearchOptions o;
    o.num_beams = 2;
    o.num_return_sequences = 2;
    o.max_new_tokens = 4;
    o.eos_id = E;
    o.early_stopping = hc.mode;
    o.length_penalty = hc.alpha;
    Run run = Drive(o, Scenario2(), 4);
    CHECK(run.steps == hc.steps);
    CheckResults(run.results, hc.results);
  }
}

TEST_CASE("beam_search: num_return_sequences and per-token logprobs", "[beam]") {
  // Scenario 1, HEURISTIC, α = 1: [acccc -0.5, aE -0.625] (see above).
  BeamSearchOptions o;
  o.num_beams = 2;
  o.max_new_tokens = 5;
  o.eos_id = E;
  o.num_return_sequences = 1;
  Run one = Drive(o, Scenario1(), 4);
  REQUIRE(one.results.size() == 1);
  CHECK(one.results[0].ids == std::vector<int32_t>{A, C, C, C, C});
  CHECK(one.results[0].logprobs == std::vector<double>{-0.5, -0.5, -0.5, -0.5, -0.5});
  CHECK(one.results[0].cum_logprob == -2.5);
  CHECK(!one.results[0].eos);
  o.num_return_sequences = 2;
  Run two = Drive(o, Scenario1(), 4);
  REQUIRE(two.results.size() == 2);
  CHECK(two.results[1].ids == std::vector<int32_t>{A, E});
  CHECK(two.results[1].logprobs == std::vector<double>{-0.5, -0.75});
  CHECK(two.results[1].cum_logprob == -1.25);
  CHECK(two.results[1].eos);
}

TEST_CASE("beam_search: ties rank lower beam, then lower token", "[beam]") {
  // Every row: E -5, a -1, b -1, c -1. Step 1: a, b, c tie at -1 -> [a, b] (lower id).
  // Step 2: all six continuations tie at -2 -> beam 0 first: [(0,a), (0,b)].
  BeamSearchOptions o;
  o.num_beams = 2;
  o.max_new_tokens = 3;
  o.eos_id = E;
  o.num_return_sequences = 2;
  ToyModel m = [](const std::vector<int32_t>&) { return Row{-5, -1, -1, -1}; };
  Run run = Drive(o, m, 4);
  REQUIRE(run.choices.size() == 3);
  CHECK(run.choices[0][0].parent == 0);
  CHECK(run.choices[0][0].token == A);
  CHECK(run.choices[0][1].parent == 0);
  CHECK(run.choices[0][1].token == Bt);
  CHECK(run.choices[1][0].parent == 0);
  CHECK(run.choices[1][0].token == A);
  CHECK(run.choices[1][1].parent == 0);
  CHECK(run.choices[1][1].token == Bt);
  // Step 3 ends by length: aaa, aab both -3 / 3; equal scores keep offer order.
  CheckResults(run.results, {{{A, A, A}, -1.0, false}, {{A, A, Bt}, -1.0, false}});
  // Each step's running beams all descend from beam a: the certain prefix grows.
  CHECK(run.prefixes[0].empty());
  CHECK(run.prefixes[1] == std::vector<int32_t>{A});
  CHECK(run.prefixes[2] == std::vector<int32_t>{A, A, A});
}

TEST_CASE("beam_search: equal finished scores", "[beam]") {
  SECTION("a newcomer tied with the worst does not enter; the bound is inclusive") {
    // B = 1, HEURISTIC, α = 0. prompt: E -1, a -1 (tie: E first, r0 -> finished {[E] -1});
    // a -1 runs (r1). Check: best running -1 <= worst -1 -> done. Result [E].
    BeamSearchOptions o;
    o.num_beams = 1;
    o.max_new_tokens = 4;
    o.eos_id = E;
    o.length_penalty = 0;
    Run run = Drive(
        o,
        [](const std::vector<int32_t>&) {
          return Row{-1, -1};
        },
        2);
    CHECK(run.steps == 1);
    CheckResults(run.results, {{{E}, -1, true}});
  }
  SECTION("of several equally worst, the latest offered leaves") {
    // B = 2, HEURISTIC, α = 0, vocabulary {E, a, b, c}.
    //   prompt: E -1, a -0.25, b -2, c -3;  after a: E -0.75, a -5, b -5, c -0.25;
    //   after c: E 0, a -5, b -5, c -1
    // Step 1: a -0.25 (r0 run), E -1 (r1 -> h1 [E] -1), b -2 (r2 run).
    // Step 2: ac -0.5 (r0 run), aE -1.0 (r1 -> h2 [a E] -1), aa -5.25 (r2 run; b's best is
    //   -7). Set {h1 -1, h2 -1}; best running -0.5 > -1 -> go on.
    // Step 3: acE -0.5 (r0 -> h3 -0.5, strictly better than the worst -1; h1 and h2 tie, h2
    //   was offered later and leaves), acc -1.5 (r1 run), aac -5.5 (r2 run). Best running -1.5
    //   <= worst -1 -> done: [h3 [a c E] -0.5, h1 [E] -1]. (HF would evict h1, the earlier.)
    BeamSearchOptions o;
    o.num_beams = 2;
    o.num_return_sequences = 2;
    o.max_new_tokens = 5;
    o.eos_id = E;
    o.length_penalty = 0;
    ToyModel m = LastTokenModel({{-1, {-1, -0.25, -2, -3}},
                                 {A, {-0.75, -5, -5, -0.25}},
                                 {Bt, {-5, -5, -5, -5}},
                                 {C, {0, -5, -5, -1}}});
    Run run = Drive(o, m, 4);
    CHECK(run.steps == 3);
    CheckResults(run.results, {{{A, C, E}, -0.5, true}, {{E}, -1, true}});
  }
}

TEST_CASE("beam_search: validation", "[beam]") {
  BeamSearchOptions o;
  CHECK(ValidateBeamSearchOptions(o).ok());
  o.num_beams = 0;
  CHECK(ValidateBeamSearchOptions(o).message() == "num_beams must be in [1, 16], got 0");
  CHECK(absl::IsInvalidArgument(ValidateBeamSearchOptions(o)));
  o.num_beams = 17;
  CHECK(ValidateBeamSearchOptions(o).message() == "num_beams must be in [1, 16], got 17");
  o.num_beams = 4;
  o.num_return_sequences = 5;
  CHECK(ValidateBeamSearchOptions(o).message() ==
        "num_return_sequences must be in [1, num_beams=4], got 5");
  o.num_return_sequences = 0;
  CHECK(ValidateBeamSearchOptions(o).message() ==
        "num_return_sequences must be in [1, num_beams=4], got 0");
  o.num_return_sequences = 4;
  o.max_new_tokens = 0;
  CHECK(ValidateBeamSearchOptions(o).message() == "max_new_tokens must be >= 1, got 0");
  o.max_new_tokens = 1;
  o.eos_id = -2;
  CHECK(ValidateBeamSearchOptions(o).message() == "eos_id must be >= -1, got -2");
  o.eos_id = 7;
  o.length_penalty = std::numeric_limits<float>::quiet_NaN();
  CHECK(ValidateBeamSearchOptions(o).message() == "length_penalty must be in [-10, 10], got nan");
  o.length_penalty = -3e38f;
  CHECK(ValidateBeamSearchOptions(o).message() ==
        "length_penalty must be in [-10, 10], got -3e+38");
  o.length_penalty = -0.5f;
  CHECK(ValidateBeamSearchOptions(o).ok());
}

TEST_CASE("beam_search: tiny vocabularies run out of beams", "[beam]") {
  BeamSearchOptions o;
  o.num_beams = 3;
  o.num_return_sequences = 3;
  o.max_new_tokens = 4;
  o.eos_id = 0;
  SECTION("only EOS: one finished hypothesis, no running beams -> done") {
    Run run = Drive(
        o, [](const std::vector<int32_t>&) { return Row{-0.5}; }, 1);
    CHECK(run.steps == 1);
    CheckResults(run.results, {{{0}, -0.5, true}});
  }
  SECTION("one ordinary token: a single running beam") {
    o.eos_id = -1;
    Run run = Drive(
        o, [](const std::vector<int32_t>&) { return Row{-0.5}; }, 1);
    for (const auto& ch : run.choices) CHECK(ch.size() <= 1);
    CheckResults(run.results, {{{0, 0, 0, 0}, -2.0 / 4, false}});
  }
  SECTION("EOS ignored: an ordinary token") {
    o.ignore_eos = true;
    Run run = Drive(
        o,
        [](const std::vector<int32_t>&) {
          return Row{-0.5, -1};
        },
        2);
    CHECK(run.steps == 4);
    REQUIRE(run.results.size() == 3);
    for (const BeamHypothesis& h : run.results) CHECK(!h.eos);
    CHECK(run.results[0].ids == std::vector<int32_t>{0, 0, 0, 0});
  }
}

}  // namespace beam_search_test
}  // namespace textgen
