#!/usr/bin/env bash
# Installs dependencies (Debian 12 packages), builds, and runs the whole test suite.
# Tests read models from $TEXTGEN_MODELS (default: ../shared/models beside the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
if [ ! -f "$TEXTGEN_MODELS/stories260K.gguf" ]; then
  echo "test.sh: no models in $TEXTGEN_MODELS (set TEXTGEN_MODELS to the shared models folder)" >&2
  exit 1
fi
bash scripts/build.sh
# Measured kernel choices (docs/kernels.md) go beside the build, not into the user's cache.
export TEXTGEN_KERNEL_CACHE="${TEXTGEN_KERNEL_CACHE:-$PWD/build/kernel-choices.tsv}"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
# The engine's tests again at each lower kernel level this CPU has (TEXTGEN_MAX_ISA), and the
# check that AVX-512/AMX code stays inside its levels.
bash scripts/test-isa-levels.sh
# The benchmark is not a timed test; a short run keeps it working.
build/bin/textgen-bench --smoke >/dev/null
echo "textgen-bench smoke run ok"
# The benchmark script end to end (server and load generator included) at --quick sizes.
bash scripts/bench.sh --quick --model "$TEXTGEN_MODELS/stories260K.gguf" \
  --out build/bench-quick.md >/dev/null 2>build/bench-quick.log ||
  { cat build/bench-quick.log >&2; exit 1; }
echo "bench.sh quick run ok"
# The container image: built from docker/Dockerfile with podman, run on the demo model, checked
# (health, streamed text, metrics, SIGTERM). Needs root or sudo.
bash scripts/test-container.sh
