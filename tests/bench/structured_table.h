// textgen-bench --structured: what constrained decoding (a JSON Schema or json_object grammar
// through GrammarConstraint) costs per token, against the same greedy decode unconstrained.
#ifndef TEXTGEN_TESTS_BENCH_STRUCTURED_TABLE_H_
#define TEXTGEN_TESTS_BENCH_STRUCTURED_TABLE_H_

#include "tests/bench/bench_options.h"

namespace textgen::bench {

// The models: o.models, else the Qwen2.5-0.5B shape in Q4_K_M written by textgen-synth-model
// (found beside this binary) into $TEXTGEN_BENCH_MODELS (kept and reused, as scripts/bench.sh
// does) or, when that is unset, into a temporary folder removed afterwards.
//
// One Markdown row per (model, grammar): an agent's JSON Schema (kAgentSchema: six properties
// with bounded strings, a bounded integer, an enum, an array of strings, a nested object) and
// OpenAI's json_object. Columns, medians over o.repeats (at least 5 for the setup timings):
// - GrammarVocab::Create (once per tokenizer), JsonSchemaToGbnf, ParseGbnf + Compile, and the
//   first FillNextTokenMask of a fresh grammar (cold mask cache);
// - decode ms/token of a greedy generation from the same prompt without and with the
//   constraint, over the steps after the first (the first carries prefill and the first mask).
//   The constrained run ends where the grammar does (or at o.structured_tokens); the
//   unconstrained one generates as many tokens with EOS ignored. The two alternate, the first
//   constrained run (cold mask cache) is reported apart, the others reuse its warm cache;
// - overhead: (with - without) / without;
// - the constraint's own time inside the runs (TokenConstraint::Mask + Accept per token, in
//   the calling thread's CPU time, robust to other processes on the cores; warm runs, the
//   cold run in parentheses), and its share of the fastest unconstrained decode ms/token;
// - a replay of the generated ids through the warm grammar (thread CPU ms per token) split
//   into FillNextTokenMask, ApplyTokenBitmask (the -inf writes into a vocabulary-sized logits
//   row) and AcceptToken.
void PrintStructuredTable(const BenchOptions& o);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_STRUCTURED_TABLE_H_
