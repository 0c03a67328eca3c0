#!/usr/bin/env bash
# Checks a binary built with the per-level kernels (engine/CMakeLists.txt) for code that could
# run AVX-512 or AMX instructions on a CPU without them: every function outside the
# textgen::...::{avx512,avx512vnni,avx512bf16,amx}:: namespaces (the avx2 level's kernels and
# all baseline code) must be free of zmm/opmask registers, the upper 16 xmm/ymm registers (EVEX
# only) and tile instructions. A hit means an inline function or template compiled at a higher
# level was linked for everyone (see engine/ops/isa_namespace.h).
#
# Usage: scripts/check-isa-levels.sh BINARY...
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
status=0
for bin in "$@"; do
  bad=$(objdump -d -C --no-show-raw-insn "$bin" | awk '
    /^[0-9a-f]+ <.*>:$/ {
      fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn)
      level = (fn ~ /::(avx512|avx512vnni|avx512bf16|amx)::/)
      next
    }
    !level && /%zmm|%k[1-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])|tileloadd|tdpbf16ps|ldtilecfg|vpdpbusd|vdpbf16ps/ {
      if (!(fn in seen)) { seen[fn] = 1; print fn ": " $0 }
    }')
  if [ -n "$bad" ]; then
    echo "$bin: AVX-512/AMX code outside the per-level kernels:" >&2
    echo "$bad" | head -20 >&2
    status=1
  else
    echo "$bin: no AVX-512/AMX code outside the avx512* and amx levels"
  fi
done
exit $status
