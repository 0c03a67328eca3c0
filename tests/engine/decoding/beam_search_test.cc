// Beam search core: hand-computed toy models for every early-stopping mode × length penalty,
// and an independent from-the-spec re-implementation compared on many random toy models.
#include "engine/decoding/beam_search.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace textgen {
namespace {

using Row = std::vector<double>;
// A toy "model": the next-token log-prob row given the generated ids (the prompt is implicit).
using ToyModel = std::function<Row(const std::vector<int32_t>& ids)>;
// A toy terminal predicate (e.g. a stop sequence): does continuing `ids` with `token` end it?
using ToyTerminal = std::function<bool(const std::vector<int32_t>& ids, int32_t token)>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Toy vocabulary of the hand-computed cases.
constexpr int32_t E = 0;  // EOS
constexpr int32_t A = 1;
constexpr int32_t Bt = 2;
constexpr int32_t C = 3;

// Rows as a function of the last generated token (-1: none yet, i.e. the prompt).
ToyModel LastTokenModel(std::map<int32_t, Row> table) {
  return [table = std::move(table)](const std::vector<int32_t>& ids) {
    return table.at(ids.empty() ? -1 : ids.back());
  };
}

bool IsPrefix(const std::vector<int32_t>& p, const std::vector<int32_t>& s) {
  return p.size() <= s.size() && std::equal(p.begin(), p.end(), s.begin());
}

struct Run {
  std::vector<std::vector<BeamChoice>> choices;  // per step
  std::vector<std::vector<int32_t>> prefixes;    // CertainPrefix() after each step
  std::vector<BeamHypothesis> results;
  int steps = 0;
};

// The caller's side: feeds each running beam's row, checks the running-beam bookkeeping and
// that CertainPrefix only grows.
Run Drive(const BeamSearchOptions& o, const ToyModel& model, int vocab,
          const ToyTerminal& terminal = nullptr) {
  REQUIRE(ValidateBeamSearchOptions(o).ok());
  BeamSearch bs(o);
  Run run;
  REQUIRE(bs.num_live() == 1);
  REQUIRE(bs.CertainPrefix().empty());
  std::vector<int32_t> prev_prefix;
  while (!bs.done()) {
    std::vector<Row> rows;
    std::vector<std::vector<int32_t>> histories;
    for (int i = 0; i < bs.num_live(); ++i) {
      histories.push_back(bs.running_ids(i));
      REQUIRE(static_cast<int>(histories.back().size()) == bs.steps());
      rows.push_back(model(histories.back()));
      REQUIRE(static_cast<int>(rows.back().size()) == vocab);
    }
    std::vector<const double*> ptrs;
    for (const Row& r : rows) ptrs.push_back(r.data());
    TerminalFn term;
    if (terminal) {
      term = [&](int beam, int32_t token) {
        return terminal(histories[static_cast<size_t>(beam)], token);
      };
    }
    std::vector<BeamChoice> ch = bs.Step(ptrs, vocab, term);
    REQUIRE(static_cast<int>(ch.size()) == bs.num_live());
    for (const BeamChoice& c : ch) {
      // A terminal continuation never runs on.
      REQUIRE(!(terminal && terminal(histories[static_cast<size_t>(c.parent)], c.token)));
    }
    for (int i = 0; i < bs.num_live(); ++i) {
      std::vector<int32_t> want = histories[static_cast<size_t>(ch[i].parent)];
      want.push_back(ch[i].token);
      REQUIRE(bs.running_ids(i) == want);
    }
    std::vector<int32_t> prefix = bs.CertainPrefix();
    REQUIRE(IsPrefix(prev_prefix, prefix));
    REQUIRE(static_cast<int>(prefix.size()) == bs.CertainPrefixLength());
    const int from = static_cast<int>(prev_prefix.size());
    REQUIRE(bs.CertainPrefixFrom(from) ==
            std::vector<int32_t>(prefix.begin() + from, prefix.end()));
    prev_prefix = prefix;
    run.choices.push_back(ch);
    run.prefixes.push_back(prefix);
    REQUIRE(bs.steps() <= o.max_new_tokens);
  }
  REQUIRE(bs.num_live() == 0);
  run.steps = bs.steps();
  run.results = bs.Results();
  REQUIRE(!run.results.empty());
  REQUIRE(bs.CertainPrefix() == run.results[0].ids);
  for (const BeamHypothesis& h : run.results) {
    REQUIRE(h.ids.size() == h.logprobs.size());
    double cum = 0;
    for (double lp : h.logprobs) cum += lp;
    REQUIRE(h.cum_logprob == Approx(cum).margin(1e-9));
    REQUIRE(h.eos == (o.eos_id >= 0 && !o.ignore_eos && h.ids.back() == o.eos_id));
    const std::vector<int32_t> head(h.ids.begin(), h.ids.end() - 1);
    REQUIRE(h.stopped == (!h.eos && terminal && terminal(head, h.ids.back())));
  }
  return run;
}

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
  CHECK(ValidateBeamSearchOptions(o).message() == "length_penalty must be finite, got nan");
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

// ---------------------------------------------------------------------------------------------
// Random toy models.

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rows depend on the whole history. style 0: continuous; 1: multiples of 0.5 (ties everywhere,
// sums exact); 2: continuous with some -inf.
ToyModel RandomModel(uint64_t seed, int vocab, int style) {
  return [=](const std::vector<int32_t>& ids) {
    uint64_t h = Mix(seed);
    for (int32_t id : ids) h = Mix(h ^ static_cast<uint64_t>(id + 1));
    std::mt19937_64 rng(h);
    Row row(static_cast<size_t>(vocab));
    for (double& v : row) {
      if (style == 1) {
        v = -0.5 * static_cast<double>(rng() % 7);
      } else {
        v = -6.0 * std::uniform_real_distribution<double>(0, 1)(rng);
        if (style == 2 && rng() % 10 == 0) v = -kInf;
      }
    }
    return row;
  };
}

// Straight from the spec, structured differently: whole histories copied per beam, all B×V
// candidates fully sorted, the finished set kept as "every hypothesis ever offered", of which
// the best B (stable sort: earlier offered first among equal scores) count.
Run Reference(const BeamSearchOptions& o, const ToyModel& model, int vocab,
              const ToyTerminal& terminal = nullptr) {
  struct Beam {
    std::vector<int32_t> ids;
    std::vector<double> lps;
    double cum = 0;
  };
  struct Cand {
    double cum;
    int beam;
    int32_t token;
    double lp;
  };
  const int nb = o.num_beams;
  const double alpha = o.length_penalty;
  const bool eos_on = !o.ignore_eos && o.eos_id >= 0;
  auto score = [&](double cum, int len) { return cum / std::pow(static_cast<double>(len), alpha); };
  std::vector<BeamHypothesis> offered;
  auto kept = [&] {
    std::vector<BeamHypothesis> v = offered;
    std::stable_sort(v.begin(), v.end(), [](const BeamHypothesis& a, const BeamHypothesis& b) {
      return a.score > b.score;
    });
    if (static_cast<int>(v.size()) > nb) v.resize(static_cast<size_t>(nb));
    return v;
  };
  std::vector<Beam> running(1);
  Run run;
  for (int step = 1;; ++step) {
    std::vector<Cand> all;
    for (size_t b = 0; b < running.size(); ++b) {
      Row row = model(running[b].ids);
      for (int t = 0; t < vocab; ++t) {
        all.push_back({running[b].cum + row[static_cast<size_t>(t)], static_cast<int>(b), t,
                       row[static_cast<size_t>(t)]});
      }
    }
    std::sort(all.begin(), all.end(), [](const Cand& x, const Cand& y) {
      if (x.cum != y.cum) return x.cum > y.cum;
      if (x.beam != y.beam) return x.beam < y.beam;
      return x.token < y.token;
    });
    if (static_cast<int>(all.size()) > 2 * nb) all.resize(static_cast<size_t>(2 * nb));
    std::vector<Beam> next;
    std::vector<BeamChoice> choices;
    for (size_t r = 0; r < all.size() && static_cast<int>(next.size()) < nb; ++r) {
      Beam child = running[static_cast<size_t>(all[r].beam)];
      const bool eos = eos_on && all[r].token == o.eos_id;
      // Terminal: treated as EOS is, whatever the token.
      const bool stopped = !eos && terminal && terminal(child.ids, all[r].token);
      child.ids.push_back(all[r].token);
      child.lps.push_back(all[r].lp);
      child.cum = all[r].cum;
      if (eos || stopped) {
        if (static_cast<int>(r) < nb) {
          offered.push_back(
              {child.ids, child.lps, score(child.cum, step), child.cum, eos, stopped});
        }
      } else {
        next.push_back(child);
        choices.push_back({all[r].beam, all[r].token});
      }
    }
    running = next;
    bool done = running.empty();
    std::vector<BeamHypothesis> k = kept();
    if (!done && static_cast<int>(k.size()) == nb) {
      double best = -kInf;
      for (const Beam& b : running) best = std::max(best, b.cum);
      const double worst = k.back().score;
      switch (o.early_stopping) {
        case EarlyStopping::kEarly:
          done = true;
          break;
        case EarlyStopping::kHeuristic:
          done = score(best, step) <= worst;
          break;
        case EarlyStopping::kNever:
          done = score(best, alpha > 0 ? o.max_new_tokens : step) <= worst;
          break;
      }
    }
    if (!done && step == o.max_new_tokens) {
      for (const Beam& b : running) {
        offered.push_back({b.ids, b.lps, score(b.cum, o.max_new_tokens), b.cum, false, false});
      }
      done = true;
    }
    k = kept();
    if (done) {
      run.choices.push_back({});
      run.prefixes.push_back(k[0].ids);
      run.steps = step;
      run.results = k;
      if (static_cast<int>(run.results.size()) > o.num_return_sequences) {
        run.results.resize(static_cast<size_t>(o.num_return_sequences));
      }
      return run;
    }
    run.choices.push_back(choices);
    // Longest common prefix of running beams and kept finished hypotheses.
    std::vector<std::vector<int32_t>> members;
    for (const Beam& b : running) members.push_back(b.ids);
    for (const BeamHypothesis& h : k) members.push_back(h.ids);
    std::vector<int32_t> lcp = members[0];
    for (const auto& m : members) {
      size_t n = 0;
      while (n < lcp.size() && n < m.size() && lcp[n] == m[n]) ++n;
      lcp.resize(n);
    }
    run.prefixes.push_back(lcp);
  }
}

void CompareWithReference(const BeamSearchOptions& o, const ToyModel& m, int vocab,
                          const ToyTerminal& terminal = nullptr) {
  Run got = Drive(o, m, vocab, terminal);
  Run want = Reference(o, m, vocab, terminal);
  REQUIRE(got.steps == want.steps);
  REQUIRE(got.choices.size() == want.choices.size());
  for (size_t s = 0; s < want.choices.size(); ++s) {
    INFO("step " << s + 1);
    REQUIRE(got.choices[s].size() == want.choices[s].size());
    for (size_t i = 0; i < want.choices[s].size(); ++i) {
      REQUIRE(got.choices[s][i].parent == want.choices[s][i].parent);
      REQUIRE(got.choices[s][i].token == want.choices[s][i].token);
    }
    REQUIRE(got.prefixes[s] == want.prefixes[s]);
  }
  REQUIRE(got.results.size() == want.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) {
    INFO("result " << i);
    REQUIRE(got.results[i].ids == want.results[i].ids);
    REQUIRE(got.results[i].logprobs == want.results[i].logprobs);
    REQUIRE(got.results[i].eos == want.results[i].eos);
    REQUIRE(got.results[i].stopped == want.results[i].stopped);
    // Same formula on the same doubles: bit-identical (also for -inf).
    REQUIRE(got.results[i].score == want.results[i].score);
    REQUIRE(got.results[i].cum_logprob == want.results[i].cum_logprob);
  }
}

TEST_CASE("beam_search: matches a from-the-spec reference on random toy models", "[beam]") {
  const EarlyStopping modes[] = {EarlyStopping::kEarly, EarlyStopping::kHeuristic,
                                 EarlyStopping::kNever};
  const float alphas[] = {0.0f, 1.0f, 2.0f, 0.5f, -0.5f};
  std::mt19937 rng(12345);
  int runs = 0;
  for (int seed = 0; seed < 600; ++seed) {
    BeamSearchOptions o;
    o.num_beams = 1 + static_cast<int>(rng() % 4);
    o.num_return_sequences = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.num_beams));
    o.max_new_tokens = 1 + static_cast<int>(rng() % 7);
    const int vocab = 1 + static_cast<int>(rng() % 10);
    o.eos_id = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab + 1)) - 1;
    o.ignore_eos = rng() % 8 == 0;
    const int style = static_cast<int>(rng() % 3);
    for (EarlyStopping mode : modes) {
      for (float alpha : alphas) {
        o.early_stopping = mode;
        o.length_penalty = alpha;
        INFO("seed " << seed << " B " << o.num_beams << " V " << vocab << " M " << o.max_new_tokens
                     << " eos " << o.eos_id << " style " << style << " mode "
                     << EarlyStoppingName(mode) << " alpha " << alpha);
        CompareWithReference(o, RandomModel(static_cast<uint64_t>(seed), vocab, style), vocab);
        ++runs;
      }
    }
  }
  CHECK(runs == 600 * 15);
}

// A history-dependent terminal predicate, like a stop string spanning tokens: true for about
// one (last token, token) pair in `one_in`.
ToyTerminal RandomTerminal(uint64_t seed, int one_in) {
  return [=](const std::vector<int32_t>& ids, int32_t token) {
    const uint64_t last = ids.empty() ? 0 : static_cast<uint64_t>(ids.back() + 1);
    return Mix(Mix(seed ^ last) ^ static_cast<uint64_t>(token + 1)) %
               static_cast<uint64_t>(one_in) ==
           0;
  };
}

TEST_CASE("beam_search: terminal predicates match the reference on random toy models",
          "[beam][stop]") {
  const EarlyStopping modes[] = {EarlyStopping::kEarly, EarlyStopping::kHeuristic,
                                 EarlyStopping::kNever};
  const float alphas[] = {0.0f, 1.0f, 2.0f, -0.5f};
  std::mt19937 rng(777);
  int stopped = 0;
  for (int seed = 0; seed < 300; ++seed) {
    BeamSearchOptions o;
    o.num_beams = 1 + static_cast<int>(rng() % 4);
    o.num_return_sequences = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.num_beams));
    o.max_new_tokens = 1 + static_cast<int>(rng() % 7);
    const int vocab = 1 + static_cast<int>(rng() % 10);
    o.eos_id = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab + 1)) - 1;
    o.ignore_eos = rng() % 8 == 0;
    const int style = static_cast<int>(rng() % 3);
    const int one_in = 2 + static_cast<int>(rng() % 5);
    ToyTerminal terminal = RandomTerminal(static_cast<uint64_t>(seed), one_in);
    for (EarlyStopping mode : modes) {
      for (float alpha : alphas) {
        o.early_stopping = mode;
        o.length_penalty = alpha;
        INFO("seed " << seed << " B " << o.num_beams << " V " << vocab << " M " << o.max_new_tokens
                     << " eos " << o.eos_id << " style " << style << " one_in " << one_in
                     << " mode " << EarlyStoppingName(mode) << " alpha " << alpha);
        ToyModel m = RandomModel(static_cast<uint64_t>(seed), vocab, style);
        CompareWithReference(o, m, vocab, terminal);
        for (const BeamHypothesis& h : Drive(o, m, vocab, terminal).results) stopped += h.stopped;
      }
    }
  }
  CHECK(stopped > 100);  // the predicate did end many hypotheses
}

TEST_CASE("beam_search: a terminal token is EOS under another name", "[beam][stop]") {
  // No EOS id, token X terminal everywhere == eos_id X: same steps, ids and scores.
  std::mt19937 rng(4242);
  for (int seed = 0; seed < 200; ++seed) {
    BeamSearchOptions o;
    o.num_beams = 1 + static_cast<int>(rng() % 5);
    o.num_return_sequences = o.num_beams;
    o.max_new_tokens = 1 + static_cast<int>(rng() % 8);
    o.length_penalty = static_cast<float>(rng() % 3);
    o.early_stopping = static_cast<EarlyStopping>(rng() % 3);
    const int vocab = 2 + static_cast<int>(rng() % 9);
    const int32_t x = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
    ToyModel m = RandomModel(9000 + static_cast<uint64_t>(seed), vocab, seed % 3);
    INFO("seed " << seed);
    BeamSearchOptions with_eos = o;
    with_eos.eos_id = x;
    Run want = Drive(with_eos, m, vocab);
    Run got = Drive(o, m, vocab, [x](const std::vector<int32_t>&, int32_t t) { return t == x; });
    REQUIRE(got.steps == want.steps);
    REQUIRE(got.results.size() == want.results.size());
    for (size_t i = 0; i < want.results.size(); ++i) {
      CHECK(got.results[i].ids == want.results[i].ids);
      CHECK(got.results[i].score == want.results[i].score);
      CHECK(got.results[i].stopped == want.results[i].eos);
      CHECK(!got.results[i].eos);
    }
  }
}

TEST_CASE("beam_search: terminal candidates by hand", "[beam][stop]") {
  // B = 2, α = 1, HEURISTIC, no EOS id; C is terminal. Vocabulary rows are {E, A, Bt, C}.
  BeamSearchOptions o;
  o.num_beams = 2;
  o.num_return_sequences = 2;
  o.max_new_tokens = 3;
  o.eos_id = -1;
  BeamSearch bs(o);
  std::vector<std::pair<int, int32_t>> asked;
  TerminalFn terminal = [&](int beam, int32_t t) {
    asked.push_back({beam, t});
    return t == C;
  };
  auto step = [&](std::vector<Row> rows) {
    std::vector<const double*> ptrs;
    for (const Row& r : rows) ptrs.push_back(r.data());
    asked.clear();
    return bs.Step(ptrs, 4, terminal);
  };
  auto same = [](const std::vector<BeamChoice>& a, const std::vector<BeamChoice>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].parent != b[i].parent || a[i].token != b[i].token) return false;
    }
    return true;
  };
  const Row after_a = {-6, -0.2, -3, -0.4};
  const Row after_b = {-6, -0.8, -4, -0.1};
  // Step 1: A -0.5, Bt -1.0 fill the beams; C (-3) is never reached, so never asked about.
  CHECK(same(step({{-4, -0.5, -1.0, -3}}), {{0, A}, {0, Bt}}));
  CHECK(asked == std::vector<std::pair<int, int32_t>>{{0, A}, {0, Bt}});
  CHECK(bs.Finished().empty());
  // Step 2, top 2B: AA -0.7 (r0, runs), AC -0.9 (r1 < B: finished, score -0.9/2),
  // BtC -1.1 (r2 >= B: dropped although terminal), BtA -1.8 (r3, runs).
  CHECK(same(step({after_a, after_b}), {{0, A}, {1, A}}));
  CHECK(asked == std::vector<std::pair<int, int32_t>>{{0, A}, {0, C}, {1, C}, {1, A}});
  std::vector<BeamHypothesis> fin = bs.Finished();
  REQUIRE(fin.size() == 1);
  CHECK(fin[0].ids == std::vector<int32_t>{A, C});
  CHECK(fin[0].score == Approx(-0.9 / 2));
  CHECK(fin[0].stopped);
  CHECK(!fin[0].eos);
  CHECK(!bs.done());
  // Step 3: AAA -0.9 (runs), AAC -1.1 (finished, -1.1/3 evicts nothing: the set has room),
  // BtAA -2.0 (runs); the set is full, -0.9/3 > -0.45 so HEURISTIC continues, but this is
  // max_new_tokens: AAA (-0.3) and BtAA (-2/3) are offered, AAA evicts AC.
  CHECK(step({after_a, after_a}).empty());
  REQUIRE(bs.done());
  std::vector<BeamHypothesis> res = bs.Results();
  REQUIRE(res.size() == 2);
  CHECK(res[0].ids == std::vector<int32_t>{A, A, A});
  CHECK(res[0].score == Approx(-0.3));
  CHECK(!res[0].stopped);
  CHECK(res[1].ids == std::vector<int32_t>{A, A, C});
  CHECK(res[1].score == Approx(-1.1 / 3));
  CHECK(res[1].stopped);
  CHECK(bs.CertainPrefix() == res[0].ids);
}

TEST_CASE("beam_search: matches the reference on a large vocabulary", "[beam]") {
  // Exercises the bounded per-row selection with vocab >> 2B and all 16 beams.
  BeamSearchOptions o;
  o.num_beams = 16;
  o.num_return_sequences = 16;
  o.max_new_tokens = 4;
  o.eos_id = 7;
  for (int style = 0; style < 3; ++style) {
    INFO("style " << style);
    CompareWithReference(o, RandomModel(99 + static_cast<uint64_t>(style), 20000, style), 20000);
  }
}

TEST_CASE("beam_search: num_beams 1 with EARLY is greedy", "[beam]") {
  for (int seed = 0; seed < 300; ++seed) {
    const int vocab = 2 + seed % 9;
    const int style = seed % 3;
    ToyModel m = RandomModel(1000 + static_cast<uint64_t>(seed), vocab, style);
    BeamSearchOptions o;
    o.num_beams = 1;
    o.early_stopping = EarlyStopping::kEarly;
    o.max_new_tokens = 1 + seed % 12;
    o.eos_id = seed % 4 == 0 ? -1 : seed % vocab;
    o.length_penalty = static_cast<float>(seed % 3);
    // Greedy: argmax, lowest id on ties; stop after EOS or max_new_tokens.
    std::vector<int32_t> ids;
    std::vector<double> lps;
    bool eos = false;
    while (static_cast<int>(ids.size()) < o.max_new_tokens && !eos) {
      Row row = m(ids);
      const int32_t t =
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      ids.push_back(t);
      lps.push_back(row[static_cast<size_t>(t)]);
      eos = t == o.eos_id;
    }
    INFO("seed " << seed);
    Run run = Drive(o, m, vocab);
    REQUIRE(run.results.size() == 1);
    CHECK(run.results[0].ids == ids);
    CHECK(run.results[0].logprobs == lps);
    CHECK(run.results[0].eos == eos);
    // With one beam the certain prefix is the whole running sequence at every step.
    for (size_t s = 0; s + 1 < run.prefixes.size(); ++s) {
      CHECK(run.prefixes[s] == std::vector<int32_t>(ids.begin(), ids.begin() + s + 1));
    }
  }
}

TEST_CASE("beam_search: certain prefix on long runs matches a naive LCP", "[beam]") {
  // Deep history trees (jump-pointer LCA) against a plain LCP of running_ids and Finished().
  for (int seed = 0; seed < 4; ++seed) {
    BeamSearchOptions o;
    o.num_beams = 1 + 5 * seed;
    o.num_return_sequences = 1;
    o.max_new_tokens = 1500;
    o.eos_id = 0;
    o.early_stopping = EarlyStopping::kNever;
    o.length_penalty = 1.0f;
    // EOS is unlikely but possible; 1-in-4 rows make one token near-certain so beams merge.
    ToyModel base = RandomModel(500 + static_cast<uint64_t>(seed), 6, seed % 2);
    ToyModel m = [base, seed](const std::vector<int32_t>& ids) {
      Row row = base(ids);
      row[0] -= 8;
      if (!ids.empty() && ids.back() % 4 == 1) row[2] = -0.01;
      // Odd seeds: an early [E] is kept for long, pinning the LCA near the root of a deep tree.
      if (ids.empty() && seed % 2 == 1) row[0] = -0.01;
      return row;
    };
    BeamSearch bs(o);
    std::vector<int32_t> prev;
    while (!bs.done()) {
      std::vector<Row> rows;
      for (int i = 0; i < bs.num_live(); ++i) rows.push_back(m(bs.running_ids(i)));
      std::vector<const double*> ptrs;
      for (const Row& r : rows) ptrs.push_back(r.data());
      bs.Step(ptrs, 6);
      std::vector<int32_t> prefix = bs.CertainPrefix();
      REQUIRE(IsPrefix(prev, prefix));
      if (!bs.done()) {
        std::vector<std::vector<int32_t>> members;
        for (int i = 0; i < bs.num_live(); ++i) members.push_back(bs.running_ids(i));
        for (const BeamHypothesis& h : bs.Finished()) members.push_back(h.ids);
        std::vector<int32_t> lcp = members[0];
        for (const auto& mem : members) {
          size_t n = 0;
          while (n < lcp.size() && n < mem.size() && lcp[n] == mem[n]) ++n;
          lcp.resize(n);
        }
        REQUIRE(prefix == lcp);
      }
      prev = prefix;
    }
    INFO("seed " << seed << " steps " << bs.steps() << " final prefix " << prev.size());
    CHECK(bs.Results()[0].ids == prev);
  }
}

}  // namespace
}  // namespace textgen
