// Decode-path kernels for float weights (F16, BF16 and, for a uniform row-range interface, F32)
// with F32 activations. The weights are read at their stored size and widened to F32 in
// registers (exact for both 16-bit types), then multiplied and accumulated in F32 with the
// register tiling of engine/ops/direct_matmul.h: up to 4 activation rows per pass over the
// weights, each weight vector loaded and converted once for all of them.
//
// Same row-range contract as engine/ops/q8_0_gemv.h: for weight rows r in [r0, r1) and
// activation rows i in [0, n), y[i * ldy + r] = sum_k x[i, k] * W[r, k] with x [n, w.in];
// nothing else in y is written. Single-threaded, arguments trusted (0 <= r0 <= r1 <= w.out,
// n >= 1, ldy >= r1, w.type matching the function), safe to call concurrently.
#ifndef TEXTGEN_ENGINE_OPS_GEMV_FLOAT_H_
#define TEXTGEN_ENGINE_OPS_GEMV_FLOAT_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

void GemvF16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1);
void GemvBf16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
              int64_t r1);
void GemvF32(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1);

// Portable C++ versions (used when the build has neither AVX-512 nor AVX2+FMA+F16C; exposed for
// the tests).
namespace portable {
void GemvF16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1);
void GemvBf16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
              int64_t r1);
void GemvF32(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_GEMV_FLOAT_H_
