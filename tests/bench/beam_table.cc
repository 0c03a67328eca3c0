#include "tests/bench/beam_table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {

void PrintBeamTable(const BenchOptions& o) {
  if (!o.rows_only) {
    absl::PrintF(
        "| model | weights | compute | decoding | new tokens | ms/token | vs greedy | "
        "peak KV blocks | vs greedy |\n|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const std::string& path : o.models) {
    std::unique_ptr<Model> model = LoadModel(path, o);
    Model& m = *model;
    const ModelConfig& c = m.config();
    auto cache = MakeCache(c, o.num_beams + 1, o);
    const std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
    DecodingOptions greedy;
    greedy.max_new_tokens =
        std::max(1, std::min(o.beam_tokens, c.n_ctx - static_cast<int>(prompt.size())));
    greedy.ignore_eos = true;
    DecodingOptions beam = greedy;
    beam.method = DecodingMethod::kBeam;
    beam.beam.num_beams = o.num_beams;
    RunGeneration(m, *cache, prompt, greedy);  // warm-up: oneDNN kernels, first touch
    double g_ms = 1e30, b_ms = 1e30;
    int g_blocks = 0, b_blocks = 0, b_tokens = 0;
    for (int r = 0; r < o.repeats; ++r) {
      const GenerationStats g = RunGeneration(m, *cache, prompt, greedy).stats;
      g_ms = std::min(g_ms, g.total_s * 1e3 / g.generated_tokens);
      g_blocks = g.peak_kv_blocks;
      const GenerationStats b = RunGeneration(m, *cache, prompt, beam).stats;
      b_ms = std::min(b_ms, b.total_s * 1e3 / b.generated_tokens);
      b_blocks = b.peak_kv_blocks;
      b_tokens = b.generated_tokens;
    }
    const std::string prefix = absl::StrFormat("| %s | %s | %s", DisplayName(m),
                                               DTypeName(c.weight_type), ComputeName(o.compute));
    absl::PrintF("%s | greedy | %d | %.3f | 1.00x | %d | 1.00x |\n", prefix, greedy.max_new_tokens,
                 g_ms, g_blocks);
    absl::PrintF("%s | beam %d | %d | %.3f | %.2fx | %d | %.2fx |\n", prefix, o.num_beams, b_tokens,
                 b_ms, b_ms / g_ms, b_blocks, static_cast<double>(b_blocks) / g_blocks);
    std::fflush(stdout);
  }
}

}  // namespace textgen::bench
