// textgen-bench: prefill and decode speed of the engine, cache on and off, as a Markdown table.
//
//   textgen-bench [--models DIR] [--new-tokens N] [--repeats R] [--threads N] [--smoke]
//
// Decode: greedy from "Once upon a time", EOS ignored, N new tokens; tokens/s over the steps
// after the first. Prefill: one forward pass over a 128-token prompt (or the context, if
// smaller). The best of R runs is reported (the machine is otherwise idle; best filters noise
// from other processes rather than hiding slow paths).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "engine/decoding/generator.h"
#include "engine/model/model.h"

namespace textgen {
namespace {

struct BenchArgs {
  std::string models;
  int new_tokens = 256;
  int repeats = 3;
  int threads = 0;
  bool smoke = false;
};

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "textgen-bench: %s\n", m.c_str());
  std::exit(2);
}

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c) {
  KvCacheOptions o;
  o.n_layers = c.n_layers;
  o.n_kv_heads = c.n_kv_heads;
  o.head_dim = c.head_dim;
  o.num_blocks = c.n_ctx / o.block_size + 2;
  auto cache = KvCache::Create(o);
  if (!cache.ok()) Die(std::string(cache.status().message()));
  return std::move(cache).value();
}

struct Row {
  std::string model;
  bool cache;
  double prefill_tps;
  double decode_tps;
  double ms_per_token;
};

Row Measure(Model& m, bool use_cache, const BenchArgs& a) {
  const ModelConfig& c = m.config();
  auto cache = MakeCache(c);
  std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
  const int new_tokens = std::min(a.new_tokens, c.n_ctx - static_cast<int>(prompt.size()));
  GenerateOptions options;
  options.max_new_tokens = new_tokens;
  options.use_cache = use_cache;
  options.ignore_eos = true;
  double best_decode = 0;
  for (int r = 0; r < a.repeats; ++r) {
    auto res = GenerateGreedy(m.llama(), *cache, prompt, m.tokenizer().eos_id(), options);
    if (!res.ok()) Die(std::string(res.status().message()));
    best_decode = std::max(best_decode, (res->ids.size() - 1) / res->decode_seconds);
  }
  // Prefill: a single forward pass over a long prompt.
  const int n_prefill = std::min(128, c.n_ctx);
  std::vector<int32_t> long_prompt(n_prefill);
  for (int i = 0; i < n_prefill; ++i) long_prompt[i] = prompt[i % prompt.size()];
  GenerateOptions one = options;
  one.max_new_tokens = 1;
  double best_prefill = 0;
  for (int r = 0; r < a.repeats; ++r) {
    auto res = GenerateGreedy(m.llama(), *cache, long_prompt, -1, one);
    if (!res.ok()) Die(std::string(res.status().message()));
    best_prefill = std::max(best_prefill, n_prefill / res->prefill_seconds);
  }
  return {c.name, use_cache, best_prefill, best_decode, 1e3 / best_decode};
}

int Main(int argc, char** argv) {
  BenchArgs a;
  const char* env = std::getenv("TEXTGEN_MODELS");
  a.models = env != nullptr ? env : "../shared/models";
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(f + ": missing value");
      return argv[++i];
    };
    auto int_value = [&]() {
      int v = 0;
      if (!absl::SimpleAtoi(value(), &v) || v < 1) Die(f + ": expected a positive integer");
      return v;
    };
    if (f == "--models")
      a.models = value();
    else if (f == "--new-tokens")
      a.new_tokens = int_value();
    else if (f == "--repeats")
      a.repeats = int_value();
    else if (f == "--threads")
      a.threads = int_value();
    else if (f == "--smoke")
      a.smoke = true;
    else
      Die("unknown flag " + f);
  }
  if (a.smoke) {
    a.new_tokens = 16;
    a.repeats = 1;
  }
  const std::vector<std::string> models = {"stories260K.gguf", "TinyStories-656K-F32.gguf"};
  std::vector<Row> rows;
  for (const std::string& name : models) {
    ModelOptions options;
    options.threads = a.threads;
    auto model = Model::Load(a.models + "/" + name, options);
    if (!model.ok()) Die(std::string(model.status().message()));
    for (bool cache : {true, false}) {
      rows.push_back(Measure(**model, cache, a));
      rows.back().model = name;
    }
  }
  std::printf(
      "| model | KV cache | prefill tok/s (128-token prompt) | decode tok/s (%d new) | ms/token "
      "|\n",
      a.new_tokens);
  std::printf("|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.0f | %.0f | %.3f |\n", r.model.c_str(), r.cache ? "on" : "off",
                r.prefill_tps, r.decode_tps, r.ms_per_token);
  }
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) { return textgen::Main(argc, argv); }
