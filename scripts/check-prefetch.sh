#!/usr/bin/env bash
# Checks that the weight kernels' software prefetches made it into a binary. Why: GCC 12 deletes
# calls to a function it finds free of side effects, and a helper holding only prefetches is
# such a function unless it is inlined first; every K-quant prefetch was silently gone that way
# for three days (decode ~25% slower), with all tests green. Each family below must have at
# least one prefetch instruction at each kernel level the binary has code for.
#
# Usage: scripts/check-prefetch.sh BINARY
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BINARY" >&2; exit 2; }
# family; function-name pattern (awk regex); the levels it prefetches at
families=(
  "Q8_0 decode kernels;GemvQ8_0Vnni|GemvQ8_0Columns8|Q8_0Panel8<|Q8_0DirectRows<;avx2 avx512 avx512vnni avx512bf16 amx"
  "Q4_K and Q4_0 column-lane decode;Q4KDirectRows<|Q4_0DirectRows<;avx512vnni avx512bf16 amx"
  "exact-mode quant tiles;GemvQuantExact|ExactTile<textgen::ops::unpack::;avx2 avx512 avx512vnni avx512bf16 amx"
  "512-bit K-quant tiles;(Q2K|Q3K|Q4K|Q6K|IQ4XS)Tile<;avx512vnni avx512bf16 amx"
  "256-bit K-quant tiles;::Tile<textgen::BlockQ[2-6]_K;avx2 avx512"
)
# Prefetch counts per (level, function), from one pass over the disassembly.
counts=$(objdump -d -C --no-show-raw-insn "$1" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
  /prefetcht0/ { n[fn]++ }
  END { for (f in n) print n[f] "\t" f }')
levels_present=$(objdump -t -C "$1" | grep -oE 'textgen::ops::(avx2|avx512|avx512vnni|avx512bf16|amx)::' |
  sort -u | sed 's/textgen::ops:://; s/:://')
status=0
for entry in "${families[@]}"; do
  IFS=';' read -r name pattern levels <<<"$entry"
  for level in $levels; do
    grep -qx "$level" <<<"$levels_present" || continue
    total=$(awk -F'\t' -v lv="::$level::" -v pat="$pattern" \
      'index($2, lv) && $2 ~ pat { s += $1 } END { print s + 0 }' <<<"$counts")
    if [ "$total" -eq 0 ]; then
      echo "$1: no prefetch instruction in the $name at the $level level" >&2
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "$1: the weight kernels' prefetches are there at every level"
exit $status
