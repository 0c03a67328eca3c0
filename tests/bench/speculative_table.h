// textgen-bench --speculative: what speculative decoding does to a request's decode time end to
// end through the engine's scheduler (drafting, verification, rollback and the adaptive draft
// length included; no server), one request at a time, against the same requests without it.
#ifndef TEXTGEN_TESTS_BENCH_SPECULATIVE_TABLE_H_
#define TEXTGEN_TESTS_BENCH_SPECULATIVE_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// Per o.models, one Markdown row per mode: off; n-gram with K fixed and adaptive; with
// o.draft_model, the draft model with K fixed and adaptive. Each mode runs the same
// story prompts (greedy, o.speculative_tokens new tokens, EOS ignored), the modes alternated
// within each of o.repeats rounds. Printed: the best round's ms per request and tokens/s, the
// drafted and accepted tokens, the speed against off, and whether every answer's ids equal
// off's (they must: a "no" is a bug, and the table says so).
void PrintSpeculativeTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_SPECULATIVE_TABLE_H_
