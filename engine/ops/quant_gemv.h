// Decode-path kernels for ggml's block formats other than Q8_0 (Q4_0 ... IQ4_XS, see
// engine/format/quant_blocks.h): weights read at their stored size from the mapped file.
//
// Row-range contract as engine/ops/q8_0_gemv.h: for weight rows r in [r0, r1) and activation
// rows i in [0, n), y[i * ldy + r] = sum_k x[i, k] * W[r, k], and nothing else of y is
// touched, so callers split [0, out) across threads. Single-threaded, arguments trusted
// (0 <= r0 <= r1 <= w.out, n >= 1, ldy >= r1, w.in a multiple of the block size), safe to call
// concurrently (scratch is per thread).
#ifndef TEXTGEN_ENGINE_OPS_QUANT_GEMV_H_
#define TEXTGEN_ENGINE_OPS_QUANT_GEMV_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// Exact mode (--compute f32): the weights are widened to F32 in registers (bit for bit the
// values of DecodeRowF32, engine/ops/quant_unpack.h) a block at a time for a tile of weight
// rows, and each widened vector is multiplied with up to 4 activation rows in F32 (FMA), so
// the result equals dequantize-then-F32-matmul up to summation order.
void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1);

namespace portable {
// Scalar widening of one row into a per-thread buffer, then simd::Dot per activation row.
void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_QUANT_GEMV_H_
