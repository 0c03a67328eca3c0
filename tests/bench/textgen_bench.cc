// textgen-bench: measured speed of the engine, printed as Markdown. Flags only; each section
// lives in its own file (bandwidth, speed_table, beam_table, cache_table, prefix_table).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/bench/bandwidth.h"
#include "tests/bench/beam_table.h"
#include "tests/bench/bench_options.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/cache_table.h"
#include "tests/bench/machine_info.h"
#include "tests/bench/prefix_table.h"
#include "tests/bench/speed_table.h"

namespace textgen::bench {
namespace {

constexpr char kUsage[] = R"(textgen-bench: measured speed of the engine, as Markdown tables.

Usage: textgen-bench [sections] [--model PATH]... [options]

Sections (several may be given; --model alone implies --speed):
  --bandwidth            memory read bandwidth: a buffer (2 GiB) touched, then summed with
                         AVX-512 loads by 1 thread and by N threads, best of 5 passes
  --speed                per --model: prefill tok/s of a 128-token prompt (seeded random ids),
                         decode tok/s of one stream, effective bandwidth (weight bytes x decode
                         tok/s) and its share of the measured N-thread bandwidth, peak RSS
  --beam                 per --model: beam search (4 beams) vs greedy, per token and KV blocks
  --cache-table          sliding-window generation with the KV cache on and off
  --prefix               automatic prefix caching on and off through the engine: a shared
                         system prompt (prompt tokens computed, TTFT), a stateless 5-turn chat
                         against a session, 16 streams with nothing to share (tok/s)
  --smoke                every section at tiny sizes on stories260K (CI keeps it working)

Options:
  --model PATH           GGUF file or Hugging Face directory (repeatable)
  --compute f32|bf16     arithmetic of the matmuls (default f32)
  --threads N            compute threads (default: the engine's choice per model) and the
                         bandwidth's thread count (default: all CPUs)
  --repeats R            best of R (default 3)
  --seed S               seed of the random prompts (default 1)
  --prompt-tokens N      --speed prefill prompt length (default 128)
  --new-tokens N         --speed decode length (default 64)
  --llama-cpp P,D        --speed: llama.cpp's prefill and decode tok/s for the rows, shown with
                         our ratio to them
  --bandwidth-mib N      --bandwidth buffer size (default 2048)
  --bandwidth-gbs X      --speed: use X GB/s as the machine's bandwidth instead of measuring
  --beam-tokens N        --beam new tokens (default 256)
  --cache-model PATH     --cache-table model (default $TEXTGEN_MODELS/stories260K.gguf)
  --cache-tokens LIST    --cache-table lengths (default 100,500,1000,5000,10000)
  --cache-context N      --cache-table context length (default 512; the model's is 2,048)
  --prefix-model PATH    --prefix model (default: the first --model, else --cache-model)
  --prefix-system N      --prefix system prompt tokens (default 1000; questions 50)
  --rows-only            print table rows only (no machine line, no table heads), to append a
                         process's rows to another's table
  --no-machine-line      leave out the first line (CPU, bandwidth, compute, threads)
)";

[[noreturn]] void Usage(const std::string& message) {
  std::fprintf(stderr, "textgen-bench: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

BenchOptions ParseFlags(int argc, char** argv) {
  BenchOptions o;
  const char* env = std::getenv("TEXTGEN_MODELS");
  const std::string models_dir = env != nullptr ? env : "../shared/models";
  o.cache_model = models_dir + "/stories260K.gguf";
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(f + ": missing value");
      return argv[++i];
    };
    auto positive = [&](const std::string& v) {
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1) Usage(f + ": expected a positive integer, got " + v);
      return n;
    };
    auto positive_double = [&](const std::string& v) {
      double x = 0;
      if (!absl::SimpleAtod(v, &x) || !(x > 0)) Usage(f + ": expected a positive number, got " + v);
      return x;
    };
    if (f == "--help" || f == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (f == "--bandwidth") {
      o.bandwidth = true;
    } else if (f == "--speed") {
      o.speed = true;
    } else if (f == "--beam") {
      o.beam = true;
    } else if (f == "--cache-table") {
      o.cache_table = true;
    } else if (f == "--prefix") {
      o.prefix = true;
    } else if (f == "--prefix-model") {
      o.prefix_model = value();
    } else if (f == "--prefix-system") {
      o.prefix_system_tokens = positive(value());
    } else if (f == "--smoke") {
      smoke = true;
    } else if (f == "--model") {
      o.models.push_back(value());
    } else if (f == "--compute") {
      const std::string v = value();
      if (v == "f32") {
        o.compute = ops::LinearCompute::kF32;
      } else if (v == "bf16") {
        o.compute = ops::LinearCompute::kBf16;
      } else {
        Usage("--compute: expected f32 or bf16, got " + v);
      }
    } else if (f == "--threads") {
      o.threads = positive(value());
    } else if (f == "--repeats") {
      o.repeats = positive(value());
    } else if (f == "--seed") {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, &o.seed)) Usage("--seed: expected an integer, got " + v);
    } else if (f == "--prompt-tokens") {
      o.prompt_tokens = positive(value());
    } else if (f == "--new-tokens") {
      o.new_tokens = positive(value());
    } else if (f == "--llama-cpp") {
      const std::string v = value();
      std::vector<std::string> parts = absl::StrSplit(v, ',');
      if (parts.size() != 2) Usage("--llama-cpp: expected PREFILL,DECODE, got " + v);
      o.ref_prefill = positive_double(parts[0]);
      o.ref_decode = positive_double(parts[1]);
    } else if (f == "--bandwidth-mib") {
      o.bandwidth_bytes = int64_t{positive(value())} << 20;
    } else if (f == "--bandwidth-gbs") {
      o.bandwidth_gbs = positive_double(value());
    } else if (f == "--beam-tokens") {
      o.beam_tokens = positive(value());
    } else if (f == "--cache-model") {
      o.cache_model = value();
    } else if (f == "--cache-context") {
      o.cache_context = positive(value());
    } else if (f == "--cache-tokens") {
      o.cache_tokens.clear();
      for (absl::string_view part : absl::StrSplit(value(), ',')) {
        o.cache_tokens.push_back(positive(std::string(part)));
      }
    } else if (f == "--rows-only") {
      o.rows_only = true;
    } else if (f == "--no-machine-line") {
      o.machine_line = false;
    } else {
      Usage("unknown flag " + f);
    }
  }
  if (smoke) {
    // Every section, each at a size that takes well under a second.
    o.bandwidth = o.speed = o.beam = o.cache_table = o.prefix = true;
    if (o.models.empty()) o.models.push_back(o.cache_model);
    o.bandwidth_bytes = int64_t{64} << 20;
    o.bandwidth_passes = 2;
    o.repeats = 1;
    o.prompt_tokens = 32;
    o.new_tokens = 8;
    o.beam_tokens = 16;
    o.cache_tokens = {100, 200};
    o.cache_context = 64;          // so that the window slides
    o.prefix_system_tokens = 200;  // stories260K's context is 512
  }
  if (o.prefix_model.empty()) o.prefix_model = o.models.empty() ? o.cache_model : o.models[0];
  const bool any = o.bandwidth || o.speed || o.beam || o.cache_table || o.prefix;
  if (!o.models.empty() && !any) o.speed = true;
  if (!any && o.models.empty()) Usage("nothing to measure");
  if ((o.speed || o.beam) && o.models.empty()) Usage("--speed and --beam need --model");
  return o;
}

int Main(int argc, char** argv) {
  const BenchOptions o = ParseFlags(argc, argv);
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const int bw_threads = o.threads > 0 ? o.threads : static_cast<int>(cpus);

  // The speed table's reference is the N-thread figure: measured unless given.
  double one_thread_gbs = 0, n_thread_gbs = o.bandwidth_gbs;
  if (o.bandwidth || (o.speed && n_thread_gbs <= 0)) {
    BandwidthOptions b;
    b.bytes = o.bandwidth_bytes;
    b.passes = o.bandwidth_passes;
    const std::vector<double> gbs = MeasureReadBandwidth(b, {1, bw_threads});
    one_thread_gbs = gbs[0];
    n_thread_gbs = gbs[1];
  }

  if (o.machine_line && !o.rows_only) {
    std::string bandwidth = "not measured";
    if (one_thread_gbs > 0) {
      bandwidth = absl::StrFormat("%.1f GB/s with %d threads (%.1f GB/s with 1)", n_thread_gbs,
                                  bw_threads, one_thread_gbs);
    } else if (n_thread_gbs > 0) {
      bandwidth = absl::StrFormat("%.1f GB/s (given)", n_thread_gbs);
    }
    absl::PrintF(
        "Machine: %s, %d CPUs; read bandwidth %s; compute %s (KV cache alike); threads %s.\n\n",
        CpuModelName(), cpus, bandwidth, ComputeName(o.compute),
        o.threads > 0 ? std::to_string(o.threads) : "auto");
  }
  if (o.bandwidth) {
    if (!o.rows_only) {
      absl::PrintF("| buffer MiB | threads | read GB/s (best of %d) |\n|---|---|---|\n",
                   o.bandwidth_passes);
    }
    absl::PrintF("| %d | 1 | %.1f |\n| %d | %d | %.1f |\n", o.bandwidth_bytes >> 20, one_thread_gbs,
                 o.bandwidth_bytes >> 20, bw_threads, n_thread_gbs);
  }
  // Sections in order, a blank line between tables (none with --rows-only: the caller is
  // gathering rows of one table).
  bool printed = o.bandwidth;
  auto section = [&](bool on, auto&& print) {
    if (!on) return;
    if (printed && !o.rows_only) absl::PrintF("\n");
    printed = true;
    print();
  };
  section(o.speed, [&] { PrintSpeedTable(o, n_thread_gbs); });
  section(o.beam, [&] { PrintBeamTable(o); });
  section(o.cache_table, [&] { PrintCacheTable(o); });
  section(o.prefix, [&] { PrintPrefixTable(o); });
  return 0;
}

}  // namespace
}  // namespace textgen::bench

int main(int argc, char** argv) { return textgen::bench::Main(argc, argv); }
