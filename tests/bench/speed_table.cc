#include "tests/bench/speed_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/format/dtype.h"
#include "engine/ops/threading.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/machine_info.h"

namespace textgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of one forward pass appending `prompt` to a fresh sequence.
double PrefillSeconds(Model& m, KvCache& cache, const std::vector<int32_t>& prompt) {
  BlockTable table;
  ForwardSeq seq{prompt, &table, 0, false};
  std::vector<float> logits;
  const Clock::time_point start = Clock::now();
  absl::Status s = m.lm().Forward(cache, absl::MakeSpan(&seq, 1), &logits);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  cache.Free(table);
  if (!s.ok()) Die(m.path() + ": prefill: " + std::string(s.message()));
  return seconds;
}

// "–" when there is no reference figure.
std::string Reference(double ref, double ours, bool ratio) {
  if (ref <= 0) return "–";
  return ratio ? absl::StrFormat("%.2fx", ours / ref) : absl::StrFormat("%g", ref);
}

}  // namespace

void PrintSpeedTable(const BenchOptions& o, double bandwidth_gbs) {
  if (!o.rows_only) {
    std::printf(
        "| model | weights | compute | threads | weight MB | prefill tok/s (%d) | llama.cpp | "
        "ratio | decode tok/s (%d) | llama.cpp | ratio | effective GB/s | %% of bandwidth | "
        "peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.prompt_tokens, o.new_tokens);
  }
  for (const std::string& path : o.models) {
    // Without the reset the peak would include whatever this process held before.
    const bool rss_reset = ResetPeakRss();
    std::unique_ptr<Model> model = LoadModel(path, o);
    Model& m = *model;
    const ModelConfig& c = m.config();
    auto cache = MakeCache(c, 1, o);

    const std::vector<int32_t> prompt =
        RandomPrompt(std::min(o.prompt_tokens, c.n_ctx - 1), c.n_vocab, o.seed);
    PrefillSeconds(m, *cache, prompt);  // warm-up: oneDNN kernels, first touch of weights
    double prefill = 0;
    for (int r = 0; r < o.repeats; ++r) {
      prefill = std::max(prefill, prompt.size() / PrefillSeconds(m, *cache, prompt));
    }

    const int32_t bos = m.tokenizer().bos_id();
    const std::vector<int32_t> start = {bos >= 0 ? bos : prompt[0]};
    DecodingOptions d;
    d.max_new_tokens = std::max(2, std::min(o.new_tokens, c.n_ctx - 1));
    d.ignore_eos = true;
    double decode = 0;
    for (int r = 0; r < o.repeats; ++r) {
      const GenerationStats s = RunGeneration(m, *cache, start, d).stats;
      decode = std::max(decode, (s.generated_tokens - 1) / (s.total_s - s.time_to_first_token_s));
    }

    const double bytes = static_cast<double>(m.lm().weight_bytes());
    const double effective_gbs = bytes * decode / 1e9;
    const std::string share =
        bandwidth_gbs > 0 ? absl::StrFormat("%.0f%%", 100 * effective_gbs / bandwidth_gbs) : "–";
    const int64_t rss = PeakRssBytes();
    const std::string rss_text =
        rss < 0 ? "–" : absl::StrFormat("%.0f%s", rss / 1048576.0, rss_reset ? "" : " (process)");
    absl::PrintF(
        "| %s | %s | %s | %d | %.1f | %.0f | %s | %s | %.1f | %s | %s | %.2f | %s | %s |\n",
        DisplayName(m), DTypeName(c.weight_type), ComputeName(o.compute), ops::NumThreads(),
        bytes / 1e6, prefill, Reference(o.ref_prefill, prefill, false),
        Reference(o.ref_prefill, prefill, true), decode, Reference(o.ref_decode, decode, false),
        Reference(o.ref_decode, decode, true), effective_gbs, share, rss_text);
    std::fflush(stdout);
  }
}

}  // namespace textgen::bench
