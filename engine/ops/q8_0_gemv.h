// Decode-path kernels for Q8_0 weights (ggml's format: blocks of 32 int8 with one F16 scale).
// Decode is bound by memory bandwidth, since every weight is streamed once per step, so these
// read the weights at their stored size (34 bytes per 32 values) and dequantize in registers;
// nothing is inflated to F32 in memory. Each weight block is loaded and decoded once for up to
// 4 activation rows.
//
// Row-range contract (shared with engine/ops/gemv_f16.h): for weight rows r in [r0, r1) and
// activation rows i in [0, n),
//   y[i * ldy + r] = sum_k x[i, k] * W[r, k],
// and no other element of y is touched, so a caller can split [0, out) across threads. The
// kernels are single-threaded, trust their arguments (0 <= r0 <= r1 <= w.out, n >= 1,
// ldy >= r1, w.in a multiple of 32, x and y not overlapping W) and are safe to call
// concurrently (each thread has its own scratch).
#ifndef TEXTGEN_ENGINE_OPS_Q8_0_GEMV_H_
#define TEXTGEN_ENGINE_OPS_Q8_0_GEMV_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/packed_activations.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// F32 activations x [n, w.in]. Each weight is dequantized in registers as F32(d) * q (exact in
// F32) and multiplied and accumulated in F32, so the result equals dequantize-then-F32-dot up
// to summation order (16 partial sums per dot product).
void GemvQ8_0Exact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                   int64_t r0, int64_t r1);

// x [n, in] -> xq [n, in / 32] with ggml's quantize_row_q8_0 (reference) semantics per block:
// amax = max |x|, d = amax / 127, id = d ? 1 / d : 0, q = roundf(x * id) (ties away from zero),
// d stored as F16 rounded to nearest even. `in` must be a multiple of 32.
void QuantizeActivationsQ8_0(const float* x, int64_t n, int64_t in, BlockQ8_0* xq);

// What llama.cpp's Q8_0 x Q8_0 path computes, with activations already quantized (xq
// [n, w.in / 32], e.g. by QuantizeActivationsQ8_0):
//   y = sum over blocks b of (F32(d_w[b]) * F32(d_x[b])) * (int32 sum_k q_w[k] * q_x[k]).
// The integer products and sums are exact (AVX-512 VNNI, or on AVX2 int16-widened
// _mm256_madd_epi16). Every level computes the same bytes, in one order per weight row:
//   acc = 0; for b in order: acc = fma(F32(isum_b), F32(d_w[b]) * F32(d_x[b]), acc)
// (portable::GemvQ8_0Vnni spells it out; column lanes at the VNNI levels,
// engine/ops/quant_columns.h, 8-row panels of ymm lanes at avx2 and avx512), so which level
// runs never changes an answer. Any int8 values are allowed on both sides (including -128).
void GemvQ8_0Vnni(const WeightView& w, const BlockQ8_0* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1);

// xq [n, nb] prepared for this level's GemvQ8_0Vnni when it reads a prepared form (AVX-512
// VNNI: per block F32(d_x) and -128 * sum(q_x) in d and c, no q or s); false, nothing written,
// otherwise. Once per call: per thread range the earlier repacking was ~30% of Q8_0 prefill.
bool PackQ8_0Vnni(const BlockQ8_0* xq, int64_t n, int64_t nb, PackedActivations* packed);

// GemvQ8_0Vnni on activation rows [i0, i0 + n) of a call whose blocks are xq [rows, nb] and,
// if PackQ8_0Vnni returned true, packed (else null); y points at row i0's output.
void GemvQ8_0VnniPacked(const WeightView& w, const BlockQ8_0* xq, const PackedActivations* packed,
                        int64_t i0, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1);

// The portable C++ versions of the above: GemvQ8_0Vnni gives every level's bytes; the others
// the same results up to float summation order.
// The public functions use them when the build has neither AVX-512 (with VNNI for
// GemvQ8_0Vnni) nor AVX2+FMA+F16C; exposed so that the tests run them on every machine.
namespace portable {
void GemvQ8_0Exact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                   int64_t r0, int64_t r1);
void QuantizeActivationsQ8_0(const float* x, int64_t n, int64_t in, BlockQ8_0* xq);
void GemvQ8_0Vnni(const WeightView& w, const BlockQ8_0* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_Q8_0_GEMV_H_
