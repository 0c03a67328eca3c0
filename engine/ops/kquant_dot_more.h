// Fast mode (--compute bf16) decode kernels for the K-quants beyond Q4_K / Q6_K (Q2_K, Q3_K,
// Q5_K) and IQ4_XS, as llama.cpp computes them: activations quantized per call to Q8_K blocks
// (engine/ops/kquant_dot.h's QuantizeActivationsQ8_K), then exact int32 dot products per
// super-block (u8 x s8 AVX2 maddubs, times the int16 sub-block scales with madd or AVX-512
// VNNI dpwssd), scaled in F32 per super-block.
//
// Row-range contract as engine/ops/q8_0_gemv.h (y[i * ldy + r] for r in [r0, r1), nothing
// else touched; single-threaded; arguments trusted; w.in a multiple of 256).
#ifndef TEXTGEN_ENGINE_OPS_KQUANT_DOT_MORE_H_
#define TEXTGEN_ENGINE_OPS_KQUANT_DOT_MORE_H_

#include <cstdint>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// True for the weight types GemvKQuantInt8More serves.
inline bool HasKQuantInt8More(WeightType t) {
  return t == WeightType::kQ2_K || t == WeightType::kQ3_K || t == WeightType::kQ5_K ||
         t == WeightType::kIQ4_XS;
}

// y = sum over super-blocks of llama.cpp's vec_dot_*_q8_K:
//   Q2_K, Q5_K: d_x * F32(d_w) * sumi - d_x * F32(dmin_w) * summins
//   Q3_K, IQ4_XS: d_x * F32(d_w) * sumi   (sumi with the signed sub-block scales)
// xq [n, w.in / 256] from QuantizeActivationsQ8_K.
void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1);

// Portable C++ versions (same integer sums), exposed so that the tests compare them with the
// SIMD path on every machine.
namespace portable {
void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KQUANT_DOT_MORE_H_
