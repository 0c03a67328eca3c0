#!/usr/bin/env bash
# The whole speed benchmark, as one Markdown document (printed, and written to
# build/bench-report.md): memory read bandwidth; prefill and decode tok/s per model shape and
# weight type with F32 and BF16 compute against llama.cpp's figures on this machine type (one
# textgen-bench process per row, so each row's peak RSS is its own); beam search vs greedy;
# the KV cache on/off table; many streams through textgen-server over gRPC on loopback.
#
# The models are synthetic (random weights, real shapes), made by textgen-synth-model and
# cached in $TEXTGEN_BENCH_MODELS (default build/bench-models); existing files are reused.
# Benchmarks are not tests: nothing here asserts a speed.
#
# Usage: scripts/bench.sh [options]
#   --model PATH        benchmark these files instead of the synthetic shapes (repeatable; no
#                       llama.cpp column; the first one is served for the many-stream table)
#   --quick             small sizes everywhere, to check that the script works (the numbers
#                       are not the benchmark's)
#   --cache-tokens LIST the cache table's lengths (default 100,500,1000,5000,10000; with the
#                       cache off the last two take over an hour on stories260K today)
#   --skip-server       leave out the many-stream table
#   --skip-cache-table  leave out the cache on/off table
#   --out FILE          where to write the report (default build/bench-report.md)
# Binaries come from $TEXTGEN_BIN_DIR (default build/bin; build them with scripts/build.sh);
# stories260K (cache table) from $TEXTGEN_MODELS (default ../shared/models).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${TEXTGEN_BIN_DIR:-build/bin}"
bench_models="${TEXTGEN_BENCH_MODELS:-build/bench-models}"
shared_models="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
out=build/bench-report.md
quick=0
server=1
cache_table=1
cache_tokens=""
user_models=()
command_line="scripts/bench.sh${*:+ $*}"

die() { echo "bench.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --model) user_models+=("$2"); shift 2 ;;
    --quick) quick=1; shift ;;
    --cache-tokens) cache_tokens="$2"; shift 2 ;;
    --skip-server) server=0; shift ;;
    --skip-cache-table) cache_table=0; shift ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench.sh: unknown argument $1" >&2; usage ;;
  esac
done

for b in textgen-bench textgen-server textgen-client; do
  [ -x "$bin/$b" ] || die "$bin/$b not found; build first (scripts/build.sh)"
done

# The issue's table: shape, weight type, llama.cpp prefill and decode tok/s (2 threads, this
# machine type). Many streams: stories110M F32, 128-token prompts, 128 new tokens each.
rows=("stories15M f32 13500 680" "stories110M f32 1300 94" "stories110M q8_0 1400 255"
      "tinyllama-1.1b f16 181 20.7")
# The families users run, at their real shapes and vocabularies, in BF16 as published (no
# llama.cpp figures measured yet: "-"). --quick keeps only the smallest, to check the path.
family_rows=("qwen2.5-0.5b bf16 - -" "qwen3-0.6b bf16 - -" "llama-3.2-1b bf16 - -"
             "gemma-3-1b bf16 - -" "phi-3.5-mini bf16 - -")
stream_counts="1 4 8 16"
stream_refs="1:118,4:255,8:358,16:488"

# Sizes: the benchmark's, or --quick's.
bench_flags=()
bandwidth_flags=()
server_flags=(--requests-per-stream 4)
if [ "$quick" = 1 ]; then
  family_rows=("${family_rows[0]}")
  bench_flags=(--repeats 1 --new-tokens 16 --beam-tokens 32)
  bandwidth_flags=(--bandwidth-mib 256)
  server_flags=(--requests-per-stream 1)
  cache_tokens="${cache_tokens:-100,200}"
fi
cache_tokens="${cache_tokens:-100,500,1000,5000,10000}"

# Models: (path, llama.cpp prefill, llama.cpp decode) per row; beam and server models.
paths=() ref_prefill=() ref_decode=()
if [ ${#user_models[@]} -gt 0 ]; then
  for m in "${user_models[@]}"; do
    [ -e "$m" ] || die "no model at $m"
    paths+=("$m"); ref_prefill+=(""); ref_decode+=("")
  done
  beam_models=("${user_models[@]}")
  server_model="${user_models[0]}"
  stream_refs=""
else
  synth="$bin/textgen-synth-model"
  [ -x "$synth" ] || die "$synth not found: it makes the synthetic models (build it, e.g.
  ninja -C build textgen-synth-model), or benchmark existing files with --model PATH"
  mkdir -p "$bench_models"
  for row in "${rows[@]}" "${family_rows[@]}"; do
    read -r shape type prefill decode <<<"$row"
    [ "$prefill" = - ] && prefill=""
    [ "$decode" = - ] && decode=""
    path="$bench_models/$shape-$type.gguf"
    if [ ! -f "$path" ]; then
      echo "bench.sh: making $path" >&2
      # Written under a temporary name, so an interrupted run leaves no half file to reuse.
      "$synth" --shape "$shape" --type "$type" --out "$path.partial.gguf"
      mv "$path.partial.gguf" "$path"
    fi
    paths+=("$path"); ref_prefill+=("$prefill"); ref_decode+=("$decode")
  done
  beam_models=("$bench_models/stories15M-f32.gguf" "$bench_models/stories110M-f32.gguf"
               "$bench_models/stories110M-q8_0.gguf")
  server_model="$bench_models/stories110M-f32.gguf"
fi
cache_model="$shared_models/stories260K.gguf"
[ "$cache_table" = 0 ] || [ -f "$cache_model" ] ||
  die "no $cache_model for the cache table (set TEXTGEN_MODELS, or --skip-cache-table)"

report() {
  echo "bench.sh: bandwidth" >&2
  local bandwidth_table gbs
  bandwidth_table="$("$bin/textgen-bench" --bandwidth --no-machine-line "${bandwidth_flags[@]}")"
  # The last row is the all-threads figure every model row is measured against.
  gbs="$(awk -F'|' 'NF > 4 && $2 ~ /[0-9]/ { v = $4 } END { gsub(/ /, "", v); print v }' \
    <<<"$bandwidth_table")"
  [ -n "$gbs" ] || die "could not read the bandwidth from: $bandwidth_table"

  echo "# textgen benchmark"
  echo
  echo "\`$command_line\` on $(date -u +%Y-%m-%d), commit $(git describe --always --dirty 2>/dev/null || echo unknown)."
  echo "Machine: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs,"\
    "$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM; load average"\
    "at the start $(cut -d' ' -f1-3 /proc/loadavg). Threads: the engine's choice per model."
  [ "$quick" = 1 ] && echo "**--quick: small sizes, not the benchmark's numbers.**"
  echo
  echo "## Memory read bandwidth"
  echo
  echo "$bandwidth_table"
  echo
  echo "## Prefill and decode"
  echo
  echo "One process per row. Prefill: one forward pass over a prompt of seeded random token ids."
  echo "Decode: one stream from BOS, EOS ignored, tok/s over the steps after the first. Best of"
  echo "the repeats. Effective GB/s = weight bytes as prepared for the compute type x decode"
  echo "tok/s, against the $gbs GB/s above. llama.cpp: 2 threads on this machine type."
  echo
  local i compute first=1 flags
  for i in "${!paths[@]}"; do
    for compute in f32 bf16; do
      echo "bench.sh: speed ${paths[$i]} ($compute)" >&2
      flags=(--speed --model "${paths[$i]}" --compute "$compute" --bandwidth-gbs "$gbs")
      [ -n "${ref_prefill[$i]}" ] && flags+=(--llama-cpp "${ref_prefill[$i]},${ref_decode[$i]}")
      if [ "$first" = 1 ]; then flags+=(--no-machine-line); first=0; else flags+=(--rows-only); fi
      "$bin/textgen-bench" "${flags[@]}" "${bench_flags[@]}"
    done
  done
  echo
  echo "## Beam search (4 beams) vs greedy"
  echo
  echo "From \"Once upon a time\", EOS ignored; time per generated token, prefill included."
  echo
  echo "bench.sh: beam" >&2
  for compute in bf16 f32; do
    flags=(--beam --no-machine-line --compute "$compute")
    [ "$compute" = f32 ] && flags+=(--rows-only)
    for m in "${beam_models[@]}"; do flags+=(--model "$m"); done
    "$bin/textgen-bench" "${flags[@]}" "${bench_flags[@]}"
  done
  if [ "$cache_table" = 1 ]; then
    echo
    echo "## KV cache on and off"
    echo
    echo "Sliding window (n_keep 1) on stories260K, EOS ignored; cache off recomputes the"
    echo "window every step."
    echo
    echo "bench.sh: cache table" >&2
    "$bin/textgen-bench" --cache-table --cache-model "$cache_model" --cache-tokens "$cache_tokens" \
      --no-machine-line "${bench_flags[@]}"
  fi
  if [ "$server" = 1 ]; then
    echo
    echo "## Many streams through textgen-server"
    echo
    echo "$(basename "$server_model") served over gRPC on loopback; textgen-client load on the"
    echo "same machine, 128-token random prompts, 128 new tokens each (EOS ignored), streams x"
    echo "${server_flags[1]} requests per row. Tokens/s is the total over all streams."
    echo
    echo "bench.sh: server" >&2
    local server_args=(--model "$server_model" --streams "$stream_counts" --prompt-tokens 128
      --new-tokens 128 --kv-cache-mib 512 --no-sessions "${server_flags[@]}")
    [ -n "$stream_refs" ] && server_args+=(--llama-cpp "$stream_refs")
    bash scripts/bench-server.sh "${server_args[@]}"
  fi
}

mkdir -p "$(dirname "$out")"
report | tee "$out.partial"
mv "$out.partial" "$out"
echo "bench.sh: report written to $out" >&2
