// Comparisons with a llama.cpp greedy reference (*.greedy.json). Teacher-forced: each case's
// prompt plus the reference's generated ids in one Forward with every logits row, so a near-tie
// that flips one greedy token does not end the comparison (a free-running comparison stops at
// the first flip, and where that falls depends on the kernels). Header-only: the test glob
// compiles only *_test.cc files.
#ifndef TEXTGEN_TESTS_ENGINE_MODEL_TEACHER_FORCED_H_
#define TEXTGEN_TESTS_ENGINE_MODEL_TEACHER_FORCED_H_

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"
#include "nlohmann/json.hpp"

namespace textgen::testing {

struct ForcedStats {
  int tokens = 0;        // reference steps compared
  int argmax_equal = 0;  // steps where our argmax is the reference's token
  double max_diff = 0;   // |logprob of the reference token - the reference's logprob|, max
  double sum_diff = 0;   // and summed over the steps
};

inline ForcedStats TeacherForce(CausalLm& m, KvCache& cache, const nlohmann::json& ref) {
  ForcedStats s;
  const int vocab = m.config().n_vocab;
  for (const auto& rc : ref["cases"]) {
    std::vector<int32_t> ids = rc["prompt_ids"].get<std::vector<int32_t>>();
    const size_t n_prompt = ids.size();
    const std::vector<int32_t> want = rc["generated_ids"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), want.begin(), want.end() - 1);
    BlockTable table;
    std::vector<float> logits;  // [ids, vocab]
    ForwardSeq f{ids, &table, 0, /*all_logits=*/true};
    REQUIRE(m.Forward(cache, absl::MakeSpan(&f, 1), &logits).ok());
    REQUIRE(logits.size() == ids.size() * static_cast<size_t>(vocab));
    for (size_t i = 0; i < want.size(); ++i) {
      const float* row = &logits[(n_prompt - 1 + i) * vocab];
      int best = 0;
      for (int v = 1; v < vocab; ++v) {
        if (row[v] > row[best]) best = v;
      }
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(double{row[v]} - row[best]);
      const double logprob = double{row[want[i]]} - row[best] - std::log(sum);
      const double diff = std::abs(logprob - rc["steps"][i]["logprob"].get<double>());
      ++s.tokens;
      if (best == want[i]) ++s.argmax_equal;
      s.max_diff = std::max(s.max_diff, diff);
      s.sum_diff += diff;
    }
    cache.Free(table);
  }
  return s;
}

struct GreedyStats {
  int tokens = 0, exact = 0;  // reference tokens, and how many we generated equal (in order)
  double max_logprob_diff = 0;
};

// Free-running greedy decoding from each case's prompt_ids, one token per Forward; a case stops
// at its first wrong id.
inline GreedyStats FreeRunGreedy(CausalLm& m, KvCache& cache, const nlohmann::json& ref) {
  GreedyStats g;
  const int vocab = m.config().n_vocab;
  for (const auto& rc : ref["cases"]) {
    const std::vector<int32_t> prompt = rc["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = rc["generated_ids"].get<std::vector<int32_t>>();
    g.tokens += static_cast<int>(want.size());
    BlockTable table;
    std::vector<float> logits;
    ForwardSeq f{prompt, &table, 0, false};
    REQUIRE(m.Forward(cache, absl::MakeSpan(&f, 1), &logits).ok());
    for (size_t i = 0; i < want.size(); ++i) {
      REQUIRE(logits.size() == static_cast<size_t>(vocab));
      int best = 0;
      for (int v = 1; v < vocab; ++v) {
        if (logits[v] > logits[best]) best = v;
      }
      if (best != want[i]) break;
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(double{logits[v]} - logits[best]);
      ++g.exact;
      g.max_logprob_diff = std::max(
          g.max_logprob_diff, std::abs(-std::log(sum) - rc["steps"][i]["logprob"].get<double>()));
      const int32_t next = best;
      ForwardSeq step{absl::MakeConstSpan(&next, 1), &table,
                      static_cast<int32_t>(prompt.size() + i), false};
      REQUIRE(m.Forward(cache, absl::MakeSpan(&step, 1), &logits).ok());
    }
    cache.Free(table);
  }
  return g;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_MODEL_TEACHER_FORCED_H_
