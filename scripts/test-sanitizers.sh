#!/usr/bin/env bash
# The whole test suite again under AddressSanitizer, LeakSanitizer and UBSan (any report fails),
# in build-asan/. CI runs it after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
# One kernel level (this CPU's, -march=native) instead of the five the default build compiles:
# under ASan each level is a slow compile, and the levels are tested by test-isa-levels.sh.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEXTGEN_SANITIZE=ON \
  -DTEXTGEN_MARCH=native -DTEXTGEN_ISA_LEVELS=native >/dev/null
cmake --build build-asan -j"$(nproc)"
# The soak test runs alone (RUN_SERIAL) for 60 s by default; under ASan it checks memory errors
# and leaks (the RSS bound is off: ASan's quarantine grows by design), which 20 s of its 64
# streams exercise as well.
export TEXTGEN_SOAK_SECONDS="${TEXTGEN_SOAK_SECONDS:-20}"
# Left out here (they run in scripts/test.sh): tests that repeat, at length, code paths that
# shorter tests run under ASan too. The first four took 660 s of test time (CI of 2026-11-29),
# the others 740 s of the 2,010 s that remained (so about 6 minutes of CI's wall time on 2
# cores).
#   compute checked against references (the greedy reference tests with the KV cache, one
#     architecture sweep and one batched-solo test still run): recomputes without the cache,
#     on two threads, in chunks, quantized twins, the budget and bf16 batching tests;
#   a window sliding thousands of tokens (the shift tests run);
#   grammar and schema sweeps over whole vocabularies and the schema conformance manifest
#     (the random-grammar masks and the grammar and response_format tests run), and the
#     tool-call grammar walk (the parsers' own tests run);
#   the template interpreter's 10^10-step runaway (its recursion and size limits run in other
#     cases; fuzz_chat_template covers the interpreter);
#   the input fuzzers written as tests (config.json, tokenizer.json value types): libFuzzer's
#     fuzz_hf_config and fuzz_hf_tokenizer run under ASan in scripts/test-fuzz.sh;
#   tokenizer and template references through textgen-run (the tokenizer tests run);
#   the real Node.js clients but the OpenAI SDK (the others send what the server tests send);
#   the 20-run kill -9 test (its restore path runs under ASan in the engine's durable tests).
asan_skip='greedy decoding matches llama.cpp without the KV cache'
asan_skip+='|greedy decoding matches llama.cpp with the ops split across 2 threads'
asan_skip+='|cache-off recomputes and the sliding window run in chunks'
asan_skip+='|quantized models of every architecture compute what their dequantized twins'
asan_skip+='|results do not depend on the budget'
asan_skip+='|16 mixed requests at once give each .* solo tokens, bf16 compute'
asan_skip+='|the sliding window generates far past the context in constant memory'
asan_skip+='|json schema conformance: refused as the manifest says'
asan_skip+='|json schema suite: every schema converts'
asan_skip+='|masks: free JSON along documents'
asan_skip+='|masks: schema grammar along documents'
asan_skip+='|whatever a required grammar lets a model write'
asan_skip+='|a hostile template stops with an error'
asan_skip+='|config.json fuzz: wrong types'
asan_skip+='|value-type fuzz never crashes'
asan_skip+='|textgen-run --tokenize --parse-special'
asan_skip+='|textgen-run --render prints'
asan_skip+='|HF tokenizer.json gives the GGUF'
asan_skip+='|HF and GGUF agree on BOS'
asan_skip+='|^openai_node/(agents|langchain|ai_sdk)$|^anthropic_node/'
asan_skip+='|sessions continue after kill -9'
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 1800 -E "$asan_skip"
