// textgen-bench --beam: what beam search costs over greedy decoding.
#ifndef TEXTGEN_TESTS_BENCH_BEAM_TABLE_H_
#define TEXTGEN_TESTS_BENCH_BEAM_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// Two Markdown rows per o.models (the table header first unless o.rows_only): greedy and beam
// search (o.num_beams beams, HEURISTIC, length penalty 1) from "Once upon a time", EOS ignored,
// o.beam_tokens new tokens; time per generated token (prefill included, best of o.repeats)
// and the most KV blocks the request held at once, each also relative to greedy.
void PrintBeamTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_BEAM_TABLE_H_
