#include "tests/bench/cache_table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {

void PrintCacheTable(const BenchOptions& o) {
  std::unique_ptr<Model> model = LoadModel(o.cache_model, o, o.cache_context);
  Model& m = *model;
  const ModelConfig& c = m.config();
  auto cache = MakeCache(c, 1, o);
  const std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
  if (!o.rows_only) {
    absl::PrintF(
        "| model (context %d) | generated tokens | context shifts | cache on s | cache off s | "
        "off / on |\n|---|---|---|---|---|---|\n",
        c.n_ctx);
  }
  for (int tokens : o.cache_tokens) {
    DecodingOptions d;
    d.max_new_tokens = tokens;
    d.ignore_eos = true;
    d.context_overflow = ContextOverflow::kSlide;
    d.n_keep = 1;
    double seconds[2] = {1e30, 1e30};  // [cache on, cache off]
    int shifts = 0;
    for (int off = 0; off < 2; ++off) {
      d.use_cache = off == 0;
      double spent = 0;
      for (int r = 0; r < o.repeats && spent < 1.0; ++r) {
        const GenerationStats s = RunGeneration(m, *cache, prompt, d).stats;
        if (s.generated_tokens != tokens) {
          Die(absl::StrFormat("%s: generated %d tokens of %d", o.cache_model, s.generated_tokens,
                              tokens));
        }
        seconds[off] = std::min(seconds[off], s.total_s);
        spent += s.total_s;
        if (off == 0) shifts = s.context_shifts;
      }
    }
    absl::PrintF("| %s | %d | %d | %.3f | %.3f | %.1fx |\n", DisplayName(m), tokens, shifts,
                 seconds[0], seconds[1], seconds[1] / seconds[0]);
    std::fflush(stdout);
  }
}

}  // namespace textgen::bench
