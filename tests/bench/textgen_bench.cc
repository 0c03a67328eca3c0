// textgen-bench: measured speed of the engine, printed as Markdown tables.
//
//   textgen-bench [--models DIR] [--new-tokens N] [--repeats R] [--threads N] [--smoke]
//
// 1. Prefill and decode tokens/s, cache on and off: greedy from "Once upon a time", EOS
//    ignored, N new tokens; decode tokens/s over the steps after the first. Prefill: the
//    first-token time of a 128-token prompt. Best of R runs (filters noise from other
//    processes rather than hiding slow paths).
// 2. Beam search (4 beams) vs greedy on the same prompt and length: time per generated token
//    and the most KV blocks the request held.
// 3. Sliding-window generation far past the context (656K model, 512-token context): time per
//    token over the last 500 tokens relative to the first 500, and blocks held.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/decoding/generation.h"
#include "engine/model/model.h"

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string models;
  int new_tokens = 256;
  int repeats = 3;
  int threads = 0;
  int slide_tokens = 10000;
  bool smoke = false;
};

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "textgen-bench: %s\n", m.c_str());
  std::exit(2);
}

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, int sequences) {
  KvCacheOptions o;
  o.n_layers = c.n_layers;
  o.n_kv_heads = c.n_kv_heads;
  o.head_dim = c.head_dim;
  o.num_blocks = sequences * (c.n_ctx / o.block_size + 2);
  auto cache = KvCache::Create(o);
  if (!cache.ok()) Die(std::string(cache.status().message()));
  return std::move(cache).value();
}

std::unique_ptr<Model> LoadModel(const BenchArgs& a, const std::string& name) {
  ModelOptions options;
  options.threads = a.threads;
  auto model = Model::Load(a.models + "/" + name, options);
  if (!model.ok()) Die(std::string(model.status().message()));
  return std::move(model).value();
}

GenerationResult Run(Model& m, KvCache& cache, const std::vector<int32_t>& prompt,
                     const DecodingOptions& o, StreamSink sink = nullptr) {
  auto r = Generate(m.llama(), m.tokenizer(), cache, prompt, o, std::move(sink));
  if (!r.ok()) Die(std::string(r.status().message()));
  return std::move(r).value();
}

double DecodeSeconds(const GenerationStats& s) { return s.total_s - s.time_to_first_token_s; }

void EngineTable(const BenchArgs& a, const std::vector<std::string>& names) {
  std::printf(
      "| model | KV cache | prefill tok/s (128-token prompt) | decode tok/s (%d new) | "
      "ms/token |\n|---|---|---|---|---|\n",
      a.new_tokens);
  for (const std::string& name : names) {
    std::unique_ptr<Model> model = LoadModel(a, name);
    Model& m = *model;
    const ModelConfig& c = m.config();
    auto cache = MakeCache(c, 1);
    std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
    const int n_prefill = std::min(128, c.n_ctx - 1);
    std::vector<int32_t> long_prompt(n_prefill);
    for (int i = 0; i < n_prefill; ++i) long_prompt[i] = prompt[i % prompt.size()];
    for (bool use_cache : {true, false}) {
      DecodingOptions o;
      o.max_new_tokens = std::min(a.new_tokens, c.n_ctx - static_cast<int>(prompt.size()));
      o.use_cache = use_cache;
      o.ignore_eos = true;
      double decode = 0, prefill = 0;
      for (int r = 0; r < a.repeats; ++r) {
        GenerationResult res = Run(m, *cache, prompt, o);
        decode = std::max(decode, (res.stats.generated_tokens - 1) / DecodeSeconds(res.stats));
        DecodingOptions one = o;
        one.max_new_tokens = 1;
        GenerationResult pre = Run(m, *cache, long_prompt, one);
        prefill = std::max(prefill, n_prefill / pre.stats.time_to_first_token_s);
      }
      std::printf("| %s | %s | %.0f | %.0f | %.3f |\n", name.c_str(), use_cache ? "on" : "off",
                  prefill, decode, 1e3 / decode);
    }
  }
}

void BeamTable(const BenchArgs& a, const std::vector<std::string>& names) {
  std::printf(
      "\n| model | decoding | new tokens | ms/token | vs greedy | peak KV blocks | vs "
      "greedy |\n|---|---|---|---|---|---|---|\n");
  for (const std::string& name : names) {
    std::unique_ptr<Model> model = LoadModel(a, name);
    Model& m = *model;
    auto cache = MakeCache(m.config(), 5);
    std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
    DecodingOptions greedy;
    greedy.max_new_tokens = a.new_tokens;
    greedy.ignore_eos = true;
    DecodingOptions beam = greedy;
    beam.method = DecodingMethod::kBeam;
    beam.beam.num_beams = 4;
    double g_ms = 1e30, b_ms = 1e30;
    int g_blocks = 0, b_blocks = 0, b_tokens = 0;
    for (int r = 0; r < a.repeats; ++r) {
      GenerationResult g = Run(m, *cache, prompt, greedy);
      g_ms = std::min(g_ms, g.stats.total_s * 1e3 / g.stats.generated_tokens);
      g_blocks = g.stats.peak_kv_blocks;
      GenerationResult b = Run(m, *cache, prompt, beam);
      b_ms = std::min(b_ms, b.stats.total_s * 1e3 / b.stats.generated_tokens);
      b_blocks = b.stats.peak_kv_blocks;
      b_tokens = b.stats.generated_tokens;
    }
    std::printf("| %s | greedy | %d | %.3f | 1.00x | %d | 1.00x |\n", name.c_str(), a.new_tokens,
                g_ms, g_blocks);
    std::printf("| %s | beam 4 | %d | %.3f | %.2fx | %d | %.2fx |\n", name.c_str(), b_tokens, b_ms,
                b_ms / g_ms, b_blocks, static_cast<double>(b_blocks) / g_blocks);
  }
}

void SlideTable(const BenchArgs& a) {
  const std::string name = "TinyStories-656K-F32.gguf";
  std::unique_ptr<Model> model = LoadModel(a, name);
  Model& m = *model;
  auto cache = MakeCache(m.config(), 1);
  std::vector<int32_t> prompt = m.tokenizer().Encode("Once upon a time", true);
  DecodingOptions o;
  o.max_new_tokens = a.slide_tokens;
  o.ignore_eos = true;
  o.context_overflow = ContextOverflow::kSlide;
  o.n_keep = 1;
  std::vector<Clock::time_point> stamps;
  stamps.reserve(a.slide_tokens + 1);
  GenerationResult r = Run(m, *cache, prompt, o, [&](const StreamDelta& d) {
    for (size_t i = 0; i < d.tokens.size(); ++i) stamps.push_back(Clock::now());
  });
  const int window = std::min(500, static_cast<int>(stamps.size()) / 4);
  auto per_token = [&](size_t first) {
    return std::chrono::duration<double, std::milli>(stamps[first + window - 1] - stamps[first])
               .count() /
           (window - 1);
  };
  const double early = per_token(1);  // skip the prefill step
  const double late = per_token(stamps.size() - window);
  std::printf(
      "\n| model (context %d) | tokens | context shifts | ms/token first %d | ms/token "
      "last %d | ratio | peak KV blocks |\n|---|---|---|---|---|---|---|\n",
      m.config().n_ctx, window, window);
  std::printf("| %s | %d | %d | %.4f | %.4f | %.2fx | %d |\n", name.c_str(),
              r.stats.generated_tokens, r.stats.context_shifts, early, late, late / early,
              r.stats.peak_kv_blocks);
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
    if (f == "--models") {
      a.models = value();
    } else if (f == "--new-tokens") {
      a.new_tokens = int_value();
    } else if (f == "--repeats") {
      a.repeats = int_value();
    } else if (f == "--threads") {
      a.threads = int_value();
    } else if (f == "--slide-tokens") {
      a.slide_tokens = int_value();
    } else if (f == "--smoke") {
      a.smoke = true;
    } else {
      Die("unknown flag " + f);
    }
  }
  if (a.smoke) {
    a.new_tokens = 16;
    a.repeats = 1;
    a.slide_tokens = 700;
  }
  const std::vector<std::string> names = {"stories260K.gguf", "TinyStories-656K-F32.gguf"};
  EngineTable(a, names);
  BeamTable(a, names);
  SlideTable(a);
  return 0;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) { return textgen::Main(argc, argv); }
