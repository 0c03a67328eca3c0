#!/usr/bin/env bash
# ctest entry: the @anthropic-ai/sdk npm package (pinned in package-lock.json) against
# textgen-server's Anthropic Messages API.
# Installs the package with `npm ci` into the build directory when it is missing or the lock
# changed. Exit 77 (ctest: skipped) only when node or npm is not installed at all.
# Usage: run_anthropic_sdk_test.sh SOURCE_DIR WORK_DIR BIN_DIR
set -euo pipefail
src=$1 work=$2 bin=$3
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"
    exit 77
  fi
done
models=${TEXTGEN_MODELS:-$src/../../../shared/models}
mkdir -p "$work"
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@anthropic-ai/sdk" ]; then
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi
cp "$src/anthropic_sdk_test.mjs" "$work/"
cd "$work"
exec node anthropic_sdk_test.mjs "$bin" "$models"
