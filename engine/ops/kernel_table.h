// The table of kernel entry points of one instruction-set level (internal to engine/ops).
//
// Each level's kernel translation units define their functions in textgen::ops::<level>
// (isa_namespace.h) and one KernelTable, kKernelTable, pointing at them
// (kernel_table_level.cc). kernel_dispatch.cc chooses one table at the first kernel call and
// defines the functions baseline code calls (GemvF16, RmsNorm, ...) as calls through it.
#ifndef TEXTGEN_ENGINE_OPS_KERNEL_TABLE_H_
#define TEXTGEN_ENGINE_OPS_KERNEL_TABLE_H_

#include <cstdint>

#include "engine/format/quant_blocks.h"
#include "engine/ops/amx_tiles.h"
#include "engine/ops/attention.h"
#include "engine/ops/cpu_features.h"
#include "engine/ops/format_kernels.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/packed_activations.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

struct KernelTable {
  const char* level;     // e.g. "avx512vnni": the namespace and TEXTGEN_MAX_ISA name
  CpuFeatures required;  // what the level was compiled for (CompiledFeatures() there)
#define TG_KERNEL(member, fn, ret, params, args) ret(*member) params;
#include "engine/ops/kernel_list.inc"
#undef TG_KERNEL
  // AmxBf16Matmul's tile loops (amx_tiles.h); null below the amx level.
  void (*amx_pack_weights)(const uint16_t* w, int64_t out, int64_t in, int64_t k_blocks,
                           int64_t out_blocks, uint16_t* dst);
  void (*amx_run)(const AmxPackedWeights& p, const float* x, int64_t n, float* y);
  void (*amx_run_widened)(const WeightView& w, int64_t tile_rows, const float* x, int64_t n,
                          float* y);
  // The kernel catalogue: per weight format, this level's matmul entries (format_kernels.h).
  const FormatCatalogue* formats;
};

namespace internal {
// The chosen level's table (chosen at the first call; kernel_select.h). Thread-safe.
const KernelTable& Kernels();
}  // namespace internal

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KERNEL_TABLE_H_
