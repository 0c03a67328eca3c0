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
# Left out here (they run in scripts/test.sh): the four slowest tests under ASan, 660 s of the
# suite's 2,300 s of test time on 2 cores (CI of 2026-11-29). Each repeats, at length, code
# paths that shorter tests run under ASan too: full recomputes without the KV cache and on two
# threads (the greedy reference tests with the cache run), a window sliding thousands of tokens
# (the shift tests run), every schema of the conformance manifest (the grammar and
# response_format tests run).
asan_skip='greedy decoding matches llama.cpp without the KV cache'
asan_skip+='|greedy decoding matches llama.cpp with the ops split across 2 threads'
asan_skip+='|the sliding window generates far past the context in constant memory'
asan_skip+='|json schema conformance: refused as the manifest says'
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 1800 -E "$asan_skip"
