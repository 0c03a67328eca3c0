#!/usr/bin/env bash
# The engine's tests in a portable build, -march=x86-64-v3 as the container image is built, in
# build-v3/. The native build (scripts/test.sh) compiles the AVX-512/AMX kernels; this one
# compiles and tests their AVX2+FMA branches and the scalar code that only such CPUs run.
# Tests read models from $TEXTGEN_MODELS (default: ../shared/models beside the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
# ccache hits survive a checkout at another path (CI clones afresh).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B build-v3 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEXTGEN_MARCH=x86-64-v3 \
  ${TEXTGEN_CMAKE_ARGS:-} >/dev/null
# Only what the engine's tests need: the per-room test binaries and textgen-run.
cmake --build build-v3 -j"$(nproc)" --target engine_util_tests engine_format_tests \
  engine_tokenizer_tests engine_kv_cache_tests engine_ops_tests engine_model_tests \
  engine_decoding_tests engine_scheduler_tests textgen-run
# The build must not use AVX-512 (zmm or mask registers) anywhere in the engine: oneDNN, a
# shared library, picks its kernels at run time, but our code is compiled for the target CPU.
if objdump -d --no-show-raw-insn build-v3/bin/textgen-run | grep -qE '%zmm|%k[1-7]'; then
  echo "test-portable.sh: build-v3/bin/textgen-run contains AVX-512 instructions" >&2
  exit 1
fi
ctest --test-dir build-v3 -R '^engine/' --output-on-failure -j"$(nproc)" --timeout 900
# Again with oneDNN held to AVX2, as on a host without AVX-512 (oneDNN picks its kernels at run
# time, so on this machine the first pass used its AVX-512/AMX ones): e.g. it has no BF16
# matmul there, which Linear must work around.
ONEDNN_MAX_CPU_ISA=AVX2 \
  ctest --test-dir build-v3 -R '^engine/' --output-on-failure -j"$(nproc)" --timeout 900
