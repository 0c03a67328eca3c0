#!/usr/bin/env bash
# Installs dependencies, builds, and generates a story with the default model (stories260K).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
model="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}/stories260K.gguf"
if [ ! -f "$model" ]; then
  model=models/stories260K.gguf
  [ -f "$model" ] || bash scripts/fetch-model.sh
fi
build/bin/textgen-run --model "$model" --prompt "${1:-Once upon a time}" --max-new-tokens 256
