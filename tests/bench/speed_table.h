// textgen-bench --speed: prefill and decode tokens/s of each model, and how close decode gets
// to the memory bandwidth.
#ifndef TEXTGEN_TESTS_BENCH_SPEED_TABLE_H_
#define TEXTGEN_TESTS_BENCH_SPEED_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// One Markdown row per o.models (the table header first unless o.rows_only):
// - prefill: one forward pass over a prompt of o.prompt_tokens seeded random ids (the first
//   forward of a fresh sequence, after one untimed warm-up), best of o.repeats;
// - decode: greedy from a one-token prompt (BOS), o.new_tokens new tokens with EOS ignored,
//   tokens/s over the steps after the first (llama-bench's tg from an empty context),
//   best of o.repeats;
// - effective bandwidth = LlamaModel::weight_bytes() x decode tokens/s, and its share of
//   `bandwidth_gbs` (the machine's measured read bandwidth; 0: not known);
// - peak RSS of the process while that model was loaded and run (VmHWM, reset before each
//   model where the kernel allows).
void PrintSpeedTable(const BenchOptions& o, double bandwidth_gbs);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_SPEED_TABLE_H_
