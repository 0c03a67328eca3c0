#!/usr/bin/env bash
# The libFuzzer targets (fuzz/) under ASan and UBSan, in build-fuzz/ (clang 14, Debian's
# libfuzzer-14-dev): every regression input in fuzz/regressions/<target>/ first, then each target
# for a bounded time on its seeds. Any crash, leak, UBSan report, timeout or out-of-memory fails
# the run and prints the reproducer's path. CI runs it after the sanitizer suite.
#
#   scripts/test-fuzz.sh [SECONDS]   # fuzzing time per target (default $TEXTGEN_FUZZ_SECONDS or 30)
#   scripts/test-fuzz.sh 0           # regression inputs only
#
# Targets run $(nproc) at a time; each keeps its growing corpus in build-fuzz/corpus/<target>/
# (kept between local runs) and writes what it finds to build-fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
SECONDS_PER_TARGET="${1:-${TEXTGEN_FUZZ_SECONDS:-30}}"
B=build-fuzz
JOBS="$(nproc)"

cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTEXTGEN_MARCH=native -DTEXTGEN_ISA_LEVELS=native \
  -DTEXTGEN_FUZZ=ON >/dev/null
cmake --build "$B" -j"$JOBS" --target fuzz_all

# target -> dictionary (none for the binary formats whose keys are few)
declare -A DICT=(
  [fuzz_gguf]=gguf.dict [fuzz_safetensors]=json.dict [fuzz_hf_config]=json.dict
  [fuzz_hf_tokenizer]=json.dict [fuzz_chat_template]=jinja.dict
  [fuzz_openai_request]=json.dict [fuzz_anthropic_request]=json.dict [fuzz_grammar]=json.dict
)
TARGETS=(fuzz_gguf fuzz_safetensors fuzz_hf_config fuzz_hf_tokenizer fuzz_tokenizer
  fuzz_chat_template fuzz_generate_request fuzz_openai_request fuzz_anthropic_request fuzz_grammar)

# Seeds made at run time: binary ones by the engine's own writer, and the real chat templates
# and a real tokenizer.json from the shared data when it is there (not committed: 700 KB).
rm -rf "$B/seeds"
"$B/bin/fuzz_make_seeds" "$B/seeds"
mkdir -p "$B/seeds/fuzz_chat_template" "$B/seeds/fuzz_hf_tokenizer"
for t in "$TEXTGEN_MODELS"/../chat-templates/templates/*.jinja; do
  [ -f "$t" ] || continue
  # Byte 0 is the render options (fuzz/chat_template_fuzz.cc): 'C' = generation prompt + bos/eos.
  { printf C; cat "$t"; } >"$B/seeds/fuzz_chat_template/$(basename "$t")"
done
# The JSON Schema corpus as fuzz_grammar seeds (byte 0 '1': a JSON Schema; fuzz/grammar_fuzz.cc).
mkdir -p "$B/seeds/fuzz_grammar"
for t in tests/data/json_schema/*.json; do
  [ "$(basename "$t")" = MANIFEST.json ] && continue
  { printf 1; cat "$t"; } >"$B/seeds/fuzz_grammar/$(basename "$t")"
done
hf_tok="$TEXTGEN_MODELS/tinystories-656k-hf/tokenizer.json"
[ -f "$hf_tok" ] && cp "$hf_tok" "$B/seeds/fuzz_hf_tokenizer/tinystories-656k.json"

export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
# A single allocation above the RSS limit is a finding too (libFuzzer's -malloc_limit_mb default).
LIMITS=(-rss_limit_mb=2048 -timeout=10)

failed=()
# 1. Regression inputs: each file once; a failure names the file.
for t in "${TARGETS[@]}"; do
  dir="fuzz/regressions/$t"
  [ -d "$dir" ] || continue
  mapfile -t files < <(find "$dir" -type f | sort)
  [ ${#files[@]} -gt 0 ] || continue
  if "$B/bin/$t" "${LIMITS[@]}" "${files[@]}" >"$B/$t.regressions.log" 2>&1; then
    echo "fuzz: $t: ${#files[@]} regression inputs pass"
  else
    echo "fuzz: FAILED $t on a regression input (fuzz/regressions/$t/):" >&2
    grep -E "^Running: |ERROR|SUMMARY|runtime error" "$B/$t.regressions.log" | tail -8 >&2
    failed+=("$t (regressions, log $B/$t.regressions.log)")
  fi
done

# 2. Bounded fuzzing, $JOBS targets at a time.
run_target() {
  local t="$1"
  local corpus="$B/corpus/$t" art="$B/artifacts/$t/"
  mkdir -p "$corpus" "$art"
  local args=("${LIMITS[@]}" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1
    -artifact_prefix="$art")
  [ -n "${DICT[$t]:-}" ] && args+=(-dict="fuzz/dicts/${DICT[$t]}")
  local dirs=("$corpus")
  for d in "fuzz/seeds/$t" "$B/seeds/$t" "fuzz/regressions/$t"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  local rc=0
  "$B/bin/$t" "${args[@]}" "${dirs[@]}" >"$B/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$B/$t.rc"
}
if [ "$SECONDS_PER_TARGET" -gt 0 ]; then
  rm -rf "$B/artifacts"
  for t in "${TARGETS[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    rm -f "$B/$t.rc"
    run_target "$t" &
  done
  wait
  for t in "${TARGETS[@]}"; do
    if [ "$(cat "$B/$t.rc" 2>/dev/null)" = 0 ]; then
      echo "fuzz: $t: $(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$B/$t.log" |
        grep -Eo '[0-9]+') runs in ${SECONDS_PER_TARGET}s, nothing found"
    else
      repro="$(find "$B/artifacts/$t" -type f | head -1)"
      echo "fuzz: FAILED $t: reproducer ${repro:-none (see the log)}, log $B/$t.log" >&2
      grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$B/$t.log" | head -6 >&2
      [ -n "$repro" ] &&
        echo "  fix it, then keep the input: cp $repro fuzz/regressions/$t/" >&2
      failed+=("$t")
    fi
  done
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets clean"
