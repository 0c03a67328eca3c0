// textgen-bench --cache-table: what the KV cache saves as generations grow past the context.
#ifndef TEXTGEN_TESTS_BENCH_CACHE_TABLE_H_
#define TEXTGEN_TESTS_BENCH_CACHE_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// One Markdown row per o.cache_tokens count (the table header first unless o.rows_only):
// greedy generation on o.cache_model from "Once upon a time" with the sliding window
// (ContextOverflow::kSlide, n_keep 1), EOS ignored, with the KV cache on and off (off: every
// step recomputes the whole window). Seconds each, best of up to o.repeats runs (a cell stops
// repeating once its runs took over a second: cache off at 10,000 tokens runs for minutes),
// the context shifts the window made, and the ratio off / on.
void PrintCacheTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_CACHE_TABLE_H_
