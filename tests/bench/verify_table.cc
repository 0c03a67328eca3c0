#include "tests/bench/verify_table.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/format/dtype.h"
#include "engine/ops/threading.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of one forward pass of `tokens` at the end of `table`, which is rolled back to its
// length before the pass. `logits` is reused so that its allocation is not timed.
double PassSeconds(Model& m, KvCache& cache, BlockTable& table, const std::vector<int32_t>& tokens,
                   std::vector<float>& logits) {
  const int context = table.num_tokens;
  ForwardSeq seq{tokens, &table, context, /*all_logits=*/tokens.size() > 1};
  const Clock::time_point start = Clock::now();
  absl::Status s = m.lm().Forward(cache, absl::MakeSpan(&seq, 1), &logits);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!s.ok()) Die(m.path() + ": verification pass: " + std::string(s.message()));
  if (absl::Status r = cache.Rollback(table, context); !r.ok()) Die(std::string(r.message()));
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void PrintVerifyTable(const BenchOptions& o) {
  if (!o.rows_only) {
    absl::PrintF(
        "| model | weights | compute | threads | context | rows | ms (best) | ms (median) | vs 1 "
        "row (best) | vs 1 row (median) |\n|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const std::string& path : o.models) {
    std::unique_ptr<Model> model = LoadModel(path, o);
    Model& m = *model;
    const ModelConfig& c = m.config();
    auto cache = MakeCache(c, 1, o);
    const int max_rows = *std::max_element(o.verify_rows.begin(), o.verify_rows.end());
    const int context = std::min(o.verify_context, c.n_ctx - max_rows);
    if (context < 1) Die(path + ": the context is too short for --verify-rows");

    BlockTable table;
    const std::vector<int32_t> prompt = RandomPrompt(context, c.n_vocab, o.seed);
    ForwardSeq prefill{prompt, &table, 0, false, /*logits=*/false};
    std::vector<float> logits;
    if (absl::Status s = m.lm().Forward(*cache, absl::MakeSpan(&prefill, 1), &logits); !s.ok()) {
      Die(path + ": prompt: " + std::string(s.message()));
    }
    // Index 0: the 1-row pass of a decode step; then one per --verify-rows entry.
    std::vector<std::vector<int32_t>> passes = {RandomPrompt(1, c.n_vocab, o.seed + 1)};
    for (int n : o.verify_rows) passes.push_back(RandomPrompt(n, c.n_vocab, o.seed + 1));
    std::vector<std::vector<double>> ms(passes.size());
    for (int warm = 0; warm < 3; ++warm) {
      for (const auto& p : passes) PassSeconds(m, *cache, table, p, logits);
    }
    for (int r = 0; r < o.repeats; ++r) {
      for (int i = 0; i < o.verify_iters; ++i) {
        for (size_t p = 0; p < passes.size(); ++p) {
          ms[p].push_back(1e3 * PassSeconds(m, *cache, table, passes[p], logits));
        }
      }
    }
    cache->Free(table);

    const double best1 = *std::min_element(ms[0].begin(), ms[0].end());
    const double median1 = Median(ms[0]);
    const std::string prefix =
        absl::StrFormat("| %s | %s | %s | %d | %d", DisplayName(m), DTypeName(c.weight_type),
                        ComputeName(o.compute), ops::NumThreads(), context);
    for (size_t p = 0; p < passes.size(); ++p) {
      const double best = *std::min_element(ms[p].begin(), ms[p].end());
      const double median = Median(ms[p]);
      absl::PrintF("%s | %d | %.2f | %.2f | %.2fx | %.2fx |\n", prefix, passes[p].size(), best,
                   median, best / best1, median / median1);
    }
    std::fflush(stdout);
  }
}

}  // namespace textgen::bench
