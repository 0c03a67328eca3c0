// Fast mode (--compute bf16) K-quant kernels in 256-bit vectors: Q4_K, Q5_K, Q6_K and IQ4_XS
// at the levels without AVX-512 VNNI (avx2, avx512; the VNNI levels have 512-bit tiles for
// those in engine/ops/kquant_dot.cc), Q2_K and Q3_K at every level. Activations quantized to
// Q8_K blocks (engine/ops/kquant_dot.h), then exact int32 dot products per super-block (AVX2
// maddubs, times the int16 sub-block scales; dpwssd where the level has VNNI), scaled in F32
// lane by lane.
//
// Tiles of one weight row x up to 4 activation rows: per super-block the row's 256 values are
// unpacked once, with their scales, and used by every activation row of the tile (a prefill
// or beam step unpacks each weight block n / 4 times, not n times). A row's result is the same
// whatever n is and wherever the row sits in the batch: the same operations in the same order
// for every activation row (batch invariance).
//
// Row-range contract as engine/ops/q8_0_gemv.h (y[i * ldy + r] for r in [r0, r1), nothing
// else touched; single-threaded; arguments trusted; w.in a multiple of 256).
#ifndef TEXTGEN_ENGINE_OPS_KQUANT_TILES_AVX2_H_
#define TEXTGEN_ENGINE_OPS_KQUANT_TILES_AVX2_H_

#include <cstdint>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS where the level has AVX2 (every level this build has
// but the baseline); false, with nothing written, for other types or without AVX2.
bool GemvKQuantTilesAvx2(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                         int64_t r0, int64_t r1);

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KQUANT_TILES_AVX2_H_
