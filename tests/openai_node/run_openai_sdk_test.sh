#!/usr/bin/env bash
# ctest entry: one script of this directory (the openai npm package, LangChain JS, the Vercel AI
# SDK; all pinned in package-lock.json) against textgen-server. Installs the packages with
# `npm ci` into the build directory when they are missing or the lock changed (under a lock:
# ctest -j starts several of these at once). Exit 77 (ctest: skipped) only when node or npm is
# not installed at all.
# Usage: run_openai_sdk_test.sh SOURCE_DIR WORK_DIR BIN_DIR [SCRIPT]  (default openai_sdk_test.mjs)
set -euo pipefail
src=$1 work=$2 bin=$3 script=${4:-openai_sdk_test.mjs}
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"
    exit 77
  fi
done
models=${TEXTGEN_MODELS:-$src/../../../shared/models}
mkdir -p "$work"
(
  flock 9
  if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" ||
     [ ! -d "$work/node_modules/openai" ]; then
    cp "$src/package.json" "$src/package-lock.json" "$work/"
    (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  fi
) 9>"$work/.npm-install.lock"
# Each script runs from a folder of its own (node finds the packages in the parent's
# node_modules), so that one test copying its files never rewrites a file another is loading.
run="$work/${script%.mjs}"
mkdir -p "$run"
cp "$src"/*.mjs "$run/"
cd "$run"
exec node "$script" "$bin" "$models"
