// Helpers shared by textgen-bench's sections: loading, a KV cache sized for a run, running a
// generation, seeded prompts. Failures end the process (a benchmark has no caller to recover).
#ifndef TEXTGEN_TESTS_BENCH_BENCH_UTIL_H_
#define TEXTGEN_TESTS_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "tests/bench/bench_options.h"

namespace textgen::bench {

// Prints "textgen-bench: MESSAGE" to stderr and exits with status 2.
[[noreturn]] void Die(const std::string& message);

// Loads `path` with the bench's compute type and thread setting.
// n_ctx > 0 serves a shorter context than the trained one (LlamaModelOptions::n_ctx).
std::unique_ptr<Model> LoadModel(const std::string& path, const BenchOptions& o, int n_ctx = 0);

// A cache holding `sequences` full contexts of `c` (plus slack for copy-on-write).
// A pool for `sequences` full contexts. Its element type follows the compute type as the
// server's --kv-type auto does: BF16 K/V with kBf16, F32 with kF32.
std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, int sequences, const BenchOptions& o);

GenerationResult RunGeneration(Model& m, KvCache& cache, const std::vector<int32_t>& prompt,
                               const DecodingOptions& o, StreamSink sink = nullptr);

// `n` token ids drawn uniformly from [0, n_vocab) by a generator seeded with `seed`.
std::vector<int32_t> RandomPrompt(int n, int n_vocab, uint64_t seed);

// general.name, or the file stem when the name is missing or only the architecture (e.g.
// stories260K.gguf calls itself "llama").
std::string DisplayName(const Model& m);

// "f32" / "bf16".
const char* ComputeName(ops::LinearCompute c);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_BENCH_UTIL_H_
