// textgen-bench: measured speed of the engine, printed as Markdown. Flags only; each section
// lives in its own file (bandwidth, speed_table, beam_table, cache_table, prefix_table).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/flags.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/threading.h"
#include "tests/bench/bandwidth.h"
#include "tests/bench/beam_table.h"
#include "tests/bench/bench_options.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/cache_table.h"
#include "tests/bench/kv_disk_table.h"
#include "tests/bench/machine_info.h"
#include "tests/bench/prefix_table.h"
#include "tests/bench/speculative_table.h"
#include "tests/bench/speed_table.h"
#include "tests/bench/structured_table.h"
#include "tests/bench/verify_table.h"

namespace textgen::bench {
namespace {

constexpr char kDescription[] = R"(textgen-bench: measured speed of the engine, as Markdown tables.

Usage: textgen-bench [sections] [--model PATH]... [options])";

// A positive integer flag.
void AddPositive(cli::FlagSet& f, const std::string& name, int* out, const std::string& help) {
  f.Add(name, out, cli::Int<int>(1, std::numeric_limits<int>::max()), "N", help);
}

void AddSectionFlags(cli::FlagSet& f, BenchOptions& o, bool* smoke) {
  f.SetGroup("Sections (several may be given; --model alone implies --speed)");
  f.Flag("--bandwidth", &o.bandwidth,
         "memory read bandwidth: a buffer (2 GiB) touched, then summed with\nAVX-512 loads by 1 "
         "thread and by N threads, best of 5 passes");
  f.Flag("--speed", &o.speed,
         "per --model: prefill tok/s of a 128-token prompt (seeded random ids),\ndecode tok/s of "
         "one stream, effective bandwidth (weight bytes x decode\ntok/s) and its share of the "
         "measured N-thread bandwidth, peak RSS");
  f.Flag("--beam", &o.beam,
         "per --model: beam search (4 beams) vs greedy, per token and KV blocks");
  f.Flag("--cache-table", &o.cache_table, "sliding-window generation with the KV cache on and off");
  f.Flag("--prefix", &o.prefix,
         "automatic prefix caching on and off through the engine: a shared\nsystem prompt "
         "(prompt tokens computed, TTFT), a stateless 5-turn chat\nagainst a session, 16 streams "
         "with nothing to share (tok/s)");
  f.Flag("--structured", &o.structured,
         "per --model (default: the Qwen2.5-0.5B shape in Q4_K_M, written by\n"
         "textgen-synth-model): greedy decode ms/token with and without a JSON\n"
         "Schema constraint (an agent's schema; json_object), schema -> GBNF,\n"
         "compile and first-mask times, the constraint's own time per token");
  f.Flag("--verify", &o.verify,
         "per --model: speculative verification's cost, one sequence's forward\nof N rows "
         "(--verify-rows, logits for each) against 1 row after a\n--verify-context prompt, "
         "best and median ms");
  f.Flag("--speculative", &o.speculative,
         "per --model: whole greedy requests through the engine without\nspeculation, with "
         "n-gram drafts (K fixed and adaptive) and, with\n--draft-model, a draft model's; ms, "
         "tokens/s, drafts accepted,\nand whether the ids equal the run without");
  f.Flag("--kv-disk", &o.kv_disk,
         "the KV disk tier: a long prompt's TTFT recomputed, warm and after a\nrestart from "
         "disk; decode with the tier on and off");
  f.Flag("--smoke", smoke, "every section at tiny sizes on stories260K (CI keeps it working)");
}

void AddOptionFlags(cli::FlagSet& f, BenchOptions& o) {
  f.SetGroup("Options");
  f.AddWith<std::string>("--model", cli::Text(), "PATH",
                         "GGUF file or Hugging Face directory (repeatable)",
                         [&o](const std::string& v) { o.models.push_back(v); });
  f.AddWith<std::string>("--compute", cli::OneOf({"f32", "bf16"}), "f32|bf16",
                         "arithmetic of the matmuls (default f32)", [&o](const std::string& v) {
                           o.compute =
                               v == "bf16" ? ops::LinearCompute::kBf16 : ops::LinearCompute::kF32;
                         });
  // TEXTGEN_BATCH_INVARIANT too, as for textgen-server.
  f.SetEnvPrefix("TEXTGEN_");
  o.batch_invariant = ops::BatchInvariantByDefault();
  f.Add("--batch-invariant", &o.batch_invariant, cli::AutoOnOff(ops::BatchInvariantByDefault),
        "auto|on|off",
        "every matmul row computed alone (on) or prefill through oneDNN\n(off); auto (default): "
        "as textgen-server chooses");
  f.AddWith<std::string>(
      "--kernel-select", cli::OneOf({"measure", "table"}), "measure|table",
      "measure (default): after loading, time each weight format's\nkernels at every level this "
      "CPU runs and keep the fastest (only\nformats whose levels give the same bytes); table: the "
      "highest\nlevel (docs/kernels.md: Kernels chosen by measurement)",
      [&o](const std::string& v) {
        o.kernel_select =
            v == "table" ? ops::KernelSelectMode::kTable : ops::KernelSelectMode::kMeasure;
      });
  f.SetEnvPrefix("");
  AddPositive(f, "--threads", &o.threads,
              "compute threads (default: the engine's choice per model) and the\nbandwidth's "
              "thread count (default: all CPUs)");
  AddPositive(f, "--repeats", &o.repeats, "best of R (default 3)");
  f.Add("--seed", &o.seed, cli::Uint64(), "S", "seed of the random prompts (default 1)");
  AddPositive(f, "--prompt-tokens", &o.prompt_tokens,
              "--speed prefill prompt length (default 128)");
  AddPositive(f, "--new-tokens", &o.new_tokens, "--speed decode length (default 64)");
  const cli::ValueParser<std::pair<double, double>> two_rates = [](const std::string& v,
                                                                   std::pair<double, double>* out) {
    const std::vector<std::string> parts = absl::StrSplit(v, ',');
    const cli::ValueParser<double> rate = cli::Number(1e-9);
    if (parts.size() != 2 || !rate(parts[0], &out->first).empty() ||
        !rate(parts[1], &out->second).empty()) {
      return std::string("PREFILL,DECODE (two positive numbers)");
    }
    return std::string();
  };
  f.AddWith<std::pair<double, double>>(
      "--llama-cpp", two_rates, "P,D",
      "--speed: llama.cpp's prefill and decode tok/s for the rows, shown with\nour ratio to them",
      [&o](std::pair<double, double> r) { std::tie(o.ref_prefill, o.ref_decode) = r; });
  f.AddWith<int>("--bandwidth-mib", cli::Int<int>(1, 1 << 20), "N",
                 "--bandwidth buffer size (default 2048)",
                 [&o](int mib) { o.bandwidth_bytes = int64_t{mib} << 20; });
  f.Add("--bandwidth-gbs", &o.bandwidth_gbs, cli::Number(1e-9), "X",
        "--speed: use X GB/s as the machine's bandwidth instead of measuring");
  AddPositive(f, "--structured-tokens", &o.structured_tokens,
              "--structured: token cap of the constrained runs (default 256)");
  AddPositive(f, "--beam-tokens", &o.beam_tokens, "--beam new tokens (default 256)");
  f.Add("--cache-model", &o.cache_model, cli::Text(), "PATH",
        "--cache-table model (default $TEXTGEN_MODELS/stories260K.gguf)");
  const cli::ValueParser<std::vector<int>> lengths = [](const std::string& v,
                                                        std::vector<int>* out) {
    std::vector<int32_t> ids;
    if (!cli::IntList()(v, &ids).empty() || *std::min_element(ids.begin(), ids.end()) < 1) {
      return std::string("comma-separated positive integers");
    }
    out->assign(ids.begin(), ids.end());
    return std::string();
  };
  f.Add("--cache-tokens", &o.cache_tokens, lengths, "LIST",
        "--cache-table lengths (default 100,500,1000,5000,10000)");
  AddPositive(f, "--cache-context", &o.cache_context,
              "--cache-table context length (default 512; the model's is 2,048)");
  f.Add("--prefix-model", &o.prefix_model, cli::Text(), "PATH",
        "--prefix model (default: the first --model, else --cache-model)");
  AddPositive(f, "--prefix-system", &o.prefix_system_tokens,
              "--prefix system prompt tokens (default 1000; questions 50)");
  f.Flag("--prefix-nomatch", &o.prefix_nomatch_only,
         "--prefix: only the no-match scenario (16 streams, random prompts), on\nand off "
         "alternating which runs first, --repeats pairs");
  f.Add("--kv-prefault", &o.kv_prefault, cli::AutoOrOnOff(), "auto|on|off",
        "--prefix: commit the KV pool at start (default auto: with the\nprefix cache)");
  f.Add("--kv-disk-model", &o.prefix_model, cli::Text(), "PATH",
        "--kv-disk model (the same setting as --prefix-model)");
  AddPositive(f, "--kv-disk-tokens", &o.kv_disk_tokens, "--kv-disk prompt tokens (default 8000)");
  f.Flag("--kv-disk-decode-only", &o.kv_disk_decode_only,
         "--kv-disk: only the decode rows (tier on against off, alternating,\n--repeats times)");
  f.Add("--kv-disk-cache-mib", &o.kv_disk_cache_mib, cli::Int<int64_t>(1, 1 << 24), "N",
        "--kv-disk KV pool in MiB (default: the engine's, 1024)");
  f.AddWith<std::vector<int>>("--verify-rows", lengths, "LIST",
                              "--verify row counts (default 5: 4 drafts and the last token);\n"
                              "implies --verify",
                              [&o](std::vector<int> rows) {
                                o.verify_rows = std::move(rows);
                                o.verify = true;
                              });
  AddPositive(f, "--verify-context", &o.verify_context,
              "--verify prompt tokens before the passes (default 256)");
  AddPositive(f, "--verify-iters", &o.verify_iters,
              "--verify passes of each size per repeat (default 20)");
  f.Add("--draft-model", &o.draft_model, cli::NonEmpty(), "PATH",
        "--speculative: a draft model with the --model's vocabulary (adds\nits rows)");
  AddPositive(f, "--speculative-new-tokens", &o.speculative_tokens,
              "--speculative tokens per request (default 256)");
  AddPositive(f, "--speculative-k", &o.speculative_k,
              "--speculative drafts per pass, at most (default 4)");
  f.Flag("--rows-only", &o.rows_only,
         "print table rows only (no machine line, no table heads), to append a\nprocess's rows "
         "to another's table");
  f.Flag("--no-machine-line", "leave out the first line (CPU, bandwidth, compute, threads)",
         [&o] { o.machine_line = false; });
}

BenchOptions ParseFlags(int argc, char** argv) {
  BenchOptions o;
  const char* env = std::getenv("TEXTGEN_MODELS");
  const std::string models_dir = env != nullptr ? env : "../shared/models";
  o.cache_model = models_dir + "/stories260K.gguf";
  bool smoke = false;
  cli::FlagSet f("textgen-bench", kDescription, cli::Wording::kExpected);
  AddSectionFlags(f, o, &smoke);
  AddOptionFlags(f, o);
  f.Parse(argc, argv);
  if (smoke) {
    // Every section, each at a size that takes well under a second.
    o.bandwidth = o.speed = o.beam = o.cache_table = o.prefix = o.structured = o.verify = true;
    o.speculative = o.kv_disk = true;
    if (o.models.empty()) o.models.push_back(o.cache_model);
    o.bandwidth_bytes = int64_t{64} << 20;
    o.bandwidth_passes = 2;
    o.repeats = 1;
    o.prompt_tokens = 32;
    o.new_tokens = 8;
    o.beam_tokens = 16;
    o.structured_tokens = 16;
    o.cache_tokens = {100, 200};
    o.cache_context = 64;          // so that the window slides
    o.prefix_system_tokens = 200;  // stories260K's context is 512
    o.verify_context = 32;
    o.verify_iters = 2;
    o.speculative_tokens = 16;
    o.kv_disk_tokens = 200;
  }
  if (o.prefix_nomatch_only) o.prefix = true;
  if (o.prefix_model.empty()) o.prefix_model = o.models.empty() ? o.cache_model : o.models[0];
  const bool any = o.bandwidth || o.speed || o.beam || o.cache_table || o.prefix || o.structured ||
                   o.verify || o.speculative || o.kv_disk;
  if (!o.models.empty() && !any) o.speed = true;
  if (!any && o.models.empty()) f.Fail("nothing to measure");
  if ((o.speed || o.beam || o.verify || o.speculative) && o.models.empty()) {
    f.Fail("--speed, --beam, --verify and --speculative need --model");
  }
  return o;
}

int Main(int argc, char** argv) {
  const BenchOptions o = ParseFlags(argc, argv);
  const absl::StatusOr<ops::KernelChoice> kernels = ops::ChooseKernels();
  if (!kernels.ok()) {
    std::fprintf(stderr, "textgen-bench: %s\n", std::string(kernels.status().message()).c_str());
    return 2;
  }
  const int cpus = ops::DefaultNumThreads();
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
        "Machine: %s, %d CPUs; read bandwidth %s; compute %s (KV cache alike), batch-invariant "
        "%s; threads %s; %s.\n\n",
        CpuModelName(), cpus, bandwidth, ComputeName(o.compute), o.batch_invariant ? "on" : "off",
        o.threads > 0 ? std::to_string(o.threads) : "auto", ops::DescribeKernels(*kernels));
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
  section(o.structured, [&] { PrintStructuredTable(o); });
  section(o.verify, [&] { PrintVerifyTable(o); });
  section(o.speculative, [&] { PrintSpeculativeTable(o); });
  section(o.kv_disk, [&] { PrintKvDiskTable(o); });
  // Which level each format's kernels ran at, where it was measured (ops/kernel_calibration.h).
  const std::vector<ops::MeasuredChoice> chosen = ops::InstalledKernelChoices();
  if (!o.rows_only && !chosen.empty()) {
    absl::PrintF("\nKernel choices (--kernel-select table turns them off):\n");
    for (const ops::MeasuredChoice& c : chosen) absl::PrintF("- %s\n", ops::DescribeChoice(c));
  }
  return 0;
}

}  // namespace
}  // namespace textgen::bench

int main(int argc, char** argv) { return textgen::bench::Main(argc, argv); }
