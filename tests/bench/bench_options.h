// What textgen-bench was asked to measure; filled from the command line by textgen_bench.cc
// and read by every section.
#ifndef TEXTGEN_TESTS_BENCH_BENCH_OPTIONS_H_
#define TEXTGEN_TESTS_BENCH_BENCH_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/kernel_calibration.h"
#include "engine/ops/linear_options.h"

namespace textgen::bench {

struct BenchOptions {
  // Sections.
  bool bandwidth = false;    // --bandwidth
  bool speed = false;        // --speed (implied by --model without another section)
  bool beam = false;         // --beam
  bool cache_table = false;  // --cache-table
  bool prefix = false;       // --prefix
  bool structured = false;   // --structured
  bool verify = false;       // --verify (implied by --verify-rows)
  bool speculative = false;  // --speculative
  bool kv_disk = false;      // --kv-disk

  std::vector<std::string> models;  // --model, for --speed and --beam
  ops::LinearCompute compute = ops::LinearCompute::kF32;
  bool batch_invariant = true;  // --batch-invariant auto|on|off (ops::LinearOptions)
  std::optional<ops::KernelSelectMode> kernel_select;  // --kernel-select measure|table
  int threads = 0;  // 0: the engine's choice per model (ModelOptions::threads)
  int repeats = 3;  // best of
  uint64_t seed = 1;

  // --bandwidth.
  int64_t bandwidth_bytes = int64_t{2} << 30;
  int bandwidth_passes = 5;
  double bandwidth_gbs = 0;  // > 0: given by --bandwidth-gbs, not measured

  // --speed.
  int prompt_tokens = 128;
  int new_tokens = 64;
  double ref_prefill = 0;  // llama.cpp's figures for the rows (0: none given)
  double ref_decode = 0;

  // --beam.
  int beam_tokens = 256;
  int num_beams = 4;

  // --cache-table.
  std::string cache_model;  // default: $TEXTGEN_MODELS/stories260K.gguf
  std::vector<int> cache_tokens = {100, 500, 1000, 5000, 10000};
  // Context served for the table (stories260K is trained on 2,048; with it, cache off at 10,000
  // tokens recomputes a ~2,000-token window per token: over an hour). 0: the trained one.
  int cache_context = 512;

  // --prefix.
  std::string prefix_model;  // default: the first --model, else cache_model
  int prefix_system_tokens = 1000;
  int prefix_question_tokens = 50;
  // --prefix-nomatch: only the no-match scenario, on/off order alternating per repeat.
  bool prefix_nomatch_only = false;
  std::optional<bool> kv_prefault;  // --kv-prefault: EngineOptions::kv_prefault

  // --kv-disk (its model is prefix_model: --kv-disk-model sets it too).
  int kv_disk_tokens = 8000;
  bool kv_disk_decode_only = false;  // --kv-disk-decode-only: the decode rows alone
  int64_t kv_disk_cache_mib = 0;     // 0: the engine's default pool

  // --structured: the constrained runs' token cap (bounded schemas end earlier).
  int structured_tokens = 256;

  // --verify: N-row forward passes (speculative verification of N-1 drafts) against 1-row.
  std::vector<int> verify_rows = {5};
  int verify_context = 256;
  int verify_iters = 20;

  // --speculative: whole requests with and without drafts, through the engine.
  std::string draft_model;       // --draft-model: adds the draft-model rows
  int speculative_tokens = 256;  // --speculative-new-tokens
  int speculative_k = 4;         // --speculative-k

  bool rows_only = false;    // print table rows only, for concatenating processes' output
  bool machine_line = true;  // the first line: CPU, bandwidth, compute, threads
};

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_BENCH_OPTIONS_H_
