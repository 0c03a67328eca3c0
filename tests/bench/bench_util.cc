#include "tests/bench/bench_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace textgen::bench {

void Die(const std::string& message) {
  std::fprintf(stderr, "textgen-bench: %s\n", message.c_str());
  std::exit(2);
}

std::unique_ptr<Model> LoadModel(const std::string& path, const BenchOptions& o, int n_ctx) {
  ModelOptions options;
  options.llama.n_ctx = n_ctx;
  options.threads = o.threads;
  options.llama.linear.compute = o.compute;
  options.llama.linear.batch_invariant = o.batch_invariant;
  options.llama.kernel_select = o.kernel_select;
  auto model = Model::Load(path, options);
  if (!model.ok()) Die(std::string(model.status().message()));
  return std::move(model).value();
}

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, int sequences, const BenchOptions& b) {
  KvCacheOptions o;
  o.type = b.compute == ops::LinearCompute::kBf16 ? KvType::kBf16 : KvType::kF32;
  o.n_layers = c.n_layers;
  o.n_kv_heads = c.n_kv_heads;
  o.head_dim = c.head_dim;
  // Each sequence may fill the model's context, but at most 8192 tokens: the tables generate a
  // few hundred, and 128K-context models (Phi-3.5 mini: 768 KiB of F32 K/V a token) would
  // otherwise reserve ~100 GB.
  constexpr int kMaxBenchContext = 8192;
  o.num_blocks = sequences * (std::min(c.n_ctx, kMaxBenchContext) / o.block_size + 2);
  auto cache = KvCache::Create(o);
  if (!cache.ok()) Die(std::string(cache.status().message()));
  return std::move(cache).value();
}

GenerationResult RunGeneration(Model& m, KvCache& cache, const std::vector<int32_t>& prompt,
                               const DecodingOptions& o, StreamSink sink) {
  auto r = Generate(m.lm(), m.tokenizer(), cache, prompt, o, std::move(sink));
  if (!r.ok()) Die(m.path() + ": " + std::string(r.status().message()));
  return std::move(r).value();
}

std::vector<int32_t> RandomPrompt(int n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, n_vocab - 1);
  std::vector<int32_t> prompt(n);
  for (int32_t& t : prompt) t = id(rng);
  return prompt;
}

std::string DisplayName(const Model& m) {
  const ModelConfig& c = m.config();
  if (!c.name.empty() && c.name != c.architecture) return c.name;
  return std::filesystem::path(m.path()).stem().string();
}

const char* ComputeName(ops::LinearCompute c) {
  return c == ops::LinearCompute::kBf16 ? "bf16" : "f32";
}

}  // namespace textgen::bench
