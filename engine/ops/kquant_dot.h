// Fast mode (--compute bf16) decode kernels for Q4_K and Q6_K weights (what Q4_K_M files are
// made of; at the AVX-512 VNNI levels Q4_K runs in column lanes, engine/ops/quant_columns.h), as
// llama.cpp computes them: activations quantized per call to Q8_K blocks (256
// int8 with an F32 scale and sums of 16), then integer dot products per super-block
// (u8 weights x s8 activations, AVX-512 VNNI or AVX2 maddubs), scaled in F32 per super-block.
// Weights are read once, at their stored size, straight from the mapping.
//
// Row-range contract as engine/ops/q8_0_gemv.h (y[i * ldy + r] for r in [r0, r1), nothing
// else touched; single-threaded; arguments trusted; w.in a multiple of 256).
#ifndef TEXTGEN_ENGINE_OPS_KQUANT_DOT_H_
#define TEXTGEN_ENGINE_OPS_KQUANT_DOT_H_

#include <cstdint>
#include <vector>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

// A call's Q8_K activations as the AVX-512 K-quant tiles read them, made once per call by the
// caller's thread and read by every thread range (was per range: 16 times per call on 2
// threads): xr, the qs reordered per format (Q4_K / Q5_K: 32-value pieces 0 2 1 3 4 6 5 7;
// IQ4_XS: 16-value halves by nibble plane), [n, nb, 256]; xm, the min terms d_x x bsums
// (Q4_K / Q5_K: per 32 values, [n, nb, 8]; Q2_K: per 16, [n, nb, 16]). Empty when the format
// needs neither (Q6_K, Q3_K).
struct KQuantPrepared {
  std::vector<int8_t> xr;
  std::vector<float> xm;
  std::vector<int16_t> xs;  // Q4_K (quant_columns.h): sums per sub-block of 32, [n, nb, 8]
};

TG_ISA_BEGIN

// True for the weight types GemvKQuantInt8 serves.
inline bool HasKQuantInt8(WeightType t) { return t == WeightType::kQ4_K || t == WeightType::kQ6_K; }

// x [n, in] -> xq [n, in / 256], ggml's quantize_row_q8_K semantics: per block the value of
// largest magnitude `max` maps to -127 (iscale = -127 / max), q = round-to-nearest-even
// (x * iscale) clamped to 127, d = 1 / iscale, bsums[j] = sum of q[16j .. 16j + 15]. An
// all-zero block gets d = 0 and q = 0.
void QuantizeActivationsQ8_K(const float* x, int64_t n, int64_t in, BlockQ8_K* xq);

// y = sum over super-blocks of the Q4_K / Q6_K x Q8_K dot product (exact int32 sums per
// super-block, then F32: d_x * d_w * sumi - d_x * dmin_w * summins for Q4_K).
void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1);

// xq [n, nb] prepared for weights of type t when this level has the AVX-512 K-quant tiles
// (true, for Q2_K .. Q6_K and IQ4_XS); false, nothing written, otherwise.
bool PrepareKQuantInt8(WeightType t, const BlockQ8_K* xq, int64_t n, int64_t nb,
                       KQuantPrepared* prepared);

// The call's kernel (GemvKQuantInt8, or GemvKQuantInt8More for the types it serves) on
// activation rows [i0, i0 + n) of xq [rows, nb], from `prepared` if PrepareKQuantInt8 returned
// true (else null); y points at row i0's output.
void GemvKQuantInt8Prepared(const WeightView& w, const BlockQ8_K* xq,
                            const KQuantPrepared* prepared, int64_t i0, int64_t n, float* y,
                            int64_t ldy, int64_t r0, int64_t r1);

// The portable versions (bit-identical quantization; the same dot products up to F32 summation
// order), exposed so that the tests compare every path the build has.
// y[i * ldy + r] for activation rows i < n and weight rows r in [r0, r1): the sum over the
// row's super-blocks of Dot(weight block, activation block), one super-block at a time (the
// simple kernels, and the per-format Dot of kquant_dot_more.cc).
template <typename Block, float (*Dot)(const Block&, const BlockQ8_K&)>
void KQuantRows(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkK;
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w.row(r));
    for (int64_t i = 0; i < n; ++i) {
      const BlockQ8_K* a = xq + i * nb;
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) sum += Dot(row[b], a[b]);
      y[i * ldy + r] = sum;
    }
  }
}

namespace portable {
void QuantizeActivationsQ8_K(const float* x, int64_t n, int64_t in, BlockQ8_K* xq);
void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KQUANT_DOT_H_
