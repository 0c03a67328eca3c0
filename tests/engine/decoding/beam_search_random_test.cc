// Beam search core against an independent, from-the-spec re-implementation (full sort of all
// candidates, whole histories copied) on many random toy models, with and without terminal
// predicates; greedy equivalence; the certain prefix on long runs.
#include <catch2/catch.hpp>

#include "engine/decoding/beam_search.h"
#include "tests/engine/decoding/beam_search_test_util.h"

namespace textgen {
namespace beam_search_random_test {

using namespace beam_testing;  // NOLINT: test vocabulary

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
// Beams 1-5 returning all, 1-8 new tokens, length penalty 0-2, any early stopping.
BeamSearchOptions RandomSmallOptions(std::mt19937& rng) {
  BeamSearchOptions o;
  o.num_beams = 1 + static_cast<int>(rng() % 5);
  o.num_return_sequences = o.num_beams;
  o.max_new_tokens = 1 + static_cast<int>(rng() % 8);
  o.length_penalty = static_cast<float>(rng() % 3);
  o.early_stopping = static_cast<EarlyStopping>(rng() % 3);
  return o;
}

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
    const BeamSearchOptions o = RandomSmallOptions(rng);
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

TEST_CASE("beam_search: every EOG id ends a hypothesis as EOS does", "[beam][eog]") {
  // eos_id X plus eog_ids {Y} == both X and Y terminal: same steps, ids and scores, and the
  // finish is reported as EOS (not as a stop).
  std::mt19937 rng(777);
  int eog_finished = 0;
  for (int seed = 0; seed < 200; ++seed) {
    const BeamSearchOptions o = RandomSmallOptions(rng);
    const int vocab = 3 + static_cast<int>(rng() % 8);
    const int32_t x = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
    const int32_t y = (x + 1 + static_cast<int32_t>(rng() % (vocab - 1))) % vocab;
    ToyModel m = RandomModel(7000 + static_cast<uint64_t>(seed), vocab, seed % 3);
    INFO("seed " << seed);
    BeamSearchOptions with_eog = o;
    with_eog.eos_id = x;
    with_eog.eog_ids = {y};
    Run got = Drive(with_eog, m, vocab);
    BeamSearchOptions plain = o;
    plain.eos_id = -1;
    Run want = Drive(plain, m, vocab,
                     [x, y](const std::vector<int32_t>&, int32_t t) { return t == x || t == y; });
    REQUIRE(got.steps == want.steps);
    REQUIRE(got.results.size() == want.results.size());
    for (size_t i = 0; i < want.results.size(); ++i) {
      CHECK(got.results[i].ids == want.results[i].ids);
      CHECK(got.results[i].score == want.results[i].score);
      CHECK(got.results[i].eos == want.results[i].stopped);
      if (got.results[i].eos && !got.results[i].ids.empty() && got.results[i].ids.back() == y) {
        ++eog_finished;
      }
    }
  }
  CHECK(eog_finished > 20);  // the extra EOG id really ended hypotheses
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

}  // namespace beam_search_random_test
}  // namespace textgen
