#!/usr/bin/env bash
# Configures and builds everything into build/ (binaries in build/bin/).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits survive a checkout at another path (CI clones afresh).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${TEXTGEN_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
