// Shared by the beam search core tests: toy models (log-prob rows as a function of the generated
// ids) and a driver that records every step.
#ifndef TEXTGEN_TESTS_ENGINE_DECODING_BEAM_SEARCH_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_DECODING_BEAM_SEARCH_TEST_UTIL_H_

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

#include "engine/decoding/beam_search.h"

namespace textgen::beam_testing {

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
inline ToyModel LastTokenModel(std::map<int32_t, Row> table) {
  return [table = std::move(table)](const std::vector<int32_t>& ids) {
    return table.at(ids.empty() ? -1 : ids.back());
  };
}

inline bool IsPrefix(const std::vector<int32_t>& p, const std::vector<int32_t>& s) {
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
inline Run Drive(const BeamSearchOptions& o, const ToyModel& model, int vocab,
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
    const bool eog = h.ids.back() == o.eos_id ||
                     std::find(o.eog_ids.begin(), o.eog_ids.end(), h.ids.back()) != o.eog_ids.end();
    REQUIRE(h.eos == (!o.ignore_eos && eog));
    const std::vector<int32_t> head(h.ids.begin(), h.ids.end() - 1);
    REQUIRE(h.stopped == (!h.eos && terminal && terminal(head, h.ids.back())));
  }
  return run;
}

}  // namespace textgen::beam_testing

#endif  // TEXTGEN_TESTS_ENGINE_DECODING_BEAM_SEARCH_TEST_UTIL_H_
