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
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 1800
