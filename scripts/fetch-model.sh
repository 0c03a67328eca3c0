#!/usr/bin/env bash
# Downloads the default demo model (karpathy's stories260K, MIT, as GGUF) into models/.
set -euo pipefail
cd "$(dirname "$0")/.."
url="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
sha="270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"
mkdir -p models
command -v curl >/dev/null || { echo "fetch-model.sh: needs curl" >&2; exit 1; }
curl -fL --retry 3 -o models/stories260K.gguf.part "$url"
echo "$sha  models/stories260K.gguf.part" | sha256sum -c - >/dev/null ||
  echo "fetch-model.sh: warning: checksum differs from the tested file" >&2
mv models/stories260K.gguf.part models/stories260K.gguf
echo "fetched models/stories260K.gguf"
