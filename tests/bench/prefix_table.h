// textgen-bench --prefix: automatic prefix caching (EngineOptions::prefix_cache) on and off,
// through the engine with its scheduler (in process, no RPC).
#ifndef TEXTGEN_TESTS_BENCH_PREFIX_TABLE_H_
#define TEXTGEN_TESTS_BENCH_PREFIX_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// For o.prefix_model, one Markdown table, each scenario measured with the prefix cache on and
// off (best or median of o.repeats where noted), all prompts seeded random token ids:
//  - shared system prompt: a 1,000-token system prompt and 16 different 50-token questions
//    (16 new tokens each): request 1 alone, then requests 2-16 together. Prompt tokens the
//    engine computed in all, request 1's time to first token, the median of requests 2-16's.
//  - stateless chat: 5 turns (a 200-token first prompt, 30-token user turns, 32-token answers),
//    each turn resending the whole conversation; turn 5's time to first token against the same
//    conversation in a session (the prefix cache stays on for the session run).
//  - no match: 16 streams of random 128-token prompts, 64 new tokens: generated tokens/s.
// Submission to first streamed token is the time to first token (queueing included).
void PrintPrefixTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_PREFIX_TABLE_H_
