// textgen-bench --verify: what speculative decoding's verification pass costs, one sequence's
// forward of N rows (its last token and N-1 drafted ones, logits for every row) against the
// forward of the one row of a plain decode step, after the same prompt.
#ifndef TEXTGEN_TESTS_BENCH_VERIFY_TABLE_H_
#define TEXTGEN_TESTS_BENCH_VERIFY_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// Per o.models, one Markdown row per N in o.verify_rows after the 1-row baseline (the table
// header first unless o.rows_only). A prompt of o.verify_context seeded random ids is computed
// once; then each timed pass appends 1 or N seeded random ids at the next position and is
// rolled back (KvCache::Rollback), so every pass sees the same context. After 3 untimed passes
// of each size, o.repeats rounds of o.verify_iters passes of each size, the sizes interleaved
// (a noisy neighbour slows them alike). Printed: best and median ms per pass, and their
// ratios to the 1-row pass's.
void PrintVerifyTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_VERIFY_TABLE_H_
