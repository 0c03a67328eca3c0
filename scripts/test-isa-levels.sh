#!/usr/bin/env bash
# The engine's tests at every kernel level below this CPU's best, in the build scripts/test.sh
# made (build/): one binary holds the kernels of every level (engine/ops/kernel_select.h), and
# TEXTGEN_MAX_ISA caps the level it runs, so one machine tests the AVX2 paths an AVX2-only host
# runs, the AVX-512 ones without VNNI, and so on. The main ctest run covered the best level.
# Also checks that no AVX-512/AMX instruction sits outside the avx512*/amx kernel levels, and
# that the weight kernels' prefetches are in the binary.
# Tests read models from $TEXTGEN_MODELS (default: ../shared/models beside the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
export TEXTGEN_MODELS="${TEXTGEN_MODELS:-$(cd .. && pwd)/shared/models}"
bash scripts/check-isa-levels.sh build/bin/textgen-server build/bin/textgen-run \
  build/bin/engine_ops_tests
# And that the weight kernels' software prefetches were not compiled away (they were once).
bash scripts/check-prefetch.sh build/bin/textgen-server

# The levels this CPU has, lowest first (the names TEXTGEN_MAX_ISA takes).
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
levels=(avx2)
if has avx512f avx512bw avx512vl avx512dq; then
  levels+=(avx512)
  has avx512_vnni && levels+=(avx512vnni)
  has avx512_vnni avx512_bf16 && levels+=(avx512bf16)
  has avx512_vnni avx512_bf16 amx_tile amx_bf16 && levels+=(amx)
fi
all_levels=("${levels[@]}")
unset 'levels[${#levels[@]}-1]'  # the best one ran in the main pass
# The whole engine suite at avx2 (the other end from the main pass); the levels in between run
# the kernel tests only, which are what differ between levels, so that CI's time does not grow
# with the CPU's level count (Sapphire Rapids has four below its best).
for level in "${levels[@]}"; do
  echo "== engine tests with TEXTGEN_MAX_ISA=$level"
  if [ "$level" = avx2 ]; then
    # Also with oneDNN held to AVX2 by its own variable, as on a host without AVX-512 (the cap
    # sets the same limit through oneDNN's API): e.g. it has no BF16 matmul there, which Linear
    # must work around.
    env TEXTGEN_MAX_ISA="$level" ONEDNN_MAX_CPU_ISA=AVX2 \
      ctest --test-dir build -R '^engine/' --output-on-failure -j"$(nproc)" --timeout 900
  else
    env TEXTGEN_MAX_ISA="$level" \
      ctest --test-dir build -R '^engine/ops/' --output-on-failure -j"$(nproc)" --timeout 900
  fi
done

# End to end: the level a CPU runs changes speed, never answers (issue 32). The same greedy
# request, at every level this CPU has, must give the same ids and logprobs, byte for byte, on
# a Q8_0 model and on an F32 one (BF16 weights in the fast mode). With --batch-invariant on:
# with off, avx2 prefills through oneDNN, whose sums are its own. Not at amx, where AMX tiles
# multiply BF16 weights in their own order (another numerics mode).
compare=()
for level in "${all_levels[@]}"; do [ "$level" = amx ] || compare+=("$level"); done
if [ "${#compare[@]}" -lt 2 ]; then
  echo "== token identity across levels: this CPU runs one level (${compare[*]}), nothing to compare"
else
  for model in TinyStories-656K-Q8_0.gguf TinyStories-656K-F32.gguf; do
    want=""
    for level in "${compare[@]}"; do
      got=$(TEXTGEN_MAX_ISA="$level" build/bin/textgen-run --model "$TEXTGEN_MODELS/$model" \
        --compute bf16 --batch-invariant on --prompt 'Once upon a time, in a small town' \
        --max-new-tokens 64 --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["generated_ids"])
print([x.hex() for x in d["logprobs"]])')
      if [ -z "$want" ]; then
        want="$got"
        first="$level"
      elif [ "$got" != "$want" ]; then
        echo "token identity across levels: $model gives other ids or logprobs at $level than at $first" >&2
        diff <(echo "$want" | tr ',' '\n') <(echo "$got" | tr ',' '\n') | head -20 >&2 || true
        exit 1
      fi
    done
    echo "== token identity across levels: $model gives the same ids and logprobs at ${compare[*]}"
  done
fi
