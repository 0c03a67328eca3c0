// Fast mode (--compute bf16) decode kernels for the 32-value block formats Q4_0, Q4_1, Q5_0,
// Q5_1, IQ4_NL and MXFP4, as llama.cpp computes them: activations quantized per call to 8-bit
// blocks of 32 (ggml's Q8_0 / Q8_1), then exact int32 dot products per block (u8 x s8: AVX-512 VNNI
// dpbusd, AVX2 maddubs + madd, or portable C++), scaled in F32 per block. Weights are read once,
// at their stored size, straight from the mapping; each weight block is decoded once for up to 4
// activation rows. At the AVX-512 VNNI levels Q4_0 runs in column lanes instead
// (engine/ops/quant_columns.h); the other formats in the row tiles here.
//
// Row-range contract as engine/ops/q8_0_gemv.h (y[i * ldy + r] for r in [r0, r1), nothing
// else touched; single-threaded; arguments trusted; w.in a multiple of 32).
#ifndef TEXTGEN_ENGINE_OPS_QUANT_DOT_SMALL_H_
#define TEXTGEN_ENGINE_OPS_QUANT_DOT_SMALL_H_

#include <cstdint>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/packed_activations.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

// True for the weight types GemvSmallQuantInt8 serves.
inline bool HasSmallQuantInt8(WeightType t) {
  return t == WeightType::kQ4_0 || t == WeightType::kQ4_1 || t == WeightType::kQ5_0 ||
         t == WeightType::kQ5_1 || t == WeightType::kIQ4_NL || t == WeightType::kMXFP4;
}

// One block of 32 activations, quantized: ggml's Q8_1 (which is Q8_0 plus `s`) with the F16
// fields widened to F32 once, and the integer sum the offset formats need. Not a file format.
struct BlockQ8_1 {
  float d;      // F32 value of the F16 scale, x ~ d * q
  float s;      // F32 value of F16(d_f32 * sum(q)), as ggml's Q8_1 stores it (Q4_1 / Q5_1 mins)
  int32_t sum;  // sum of q (the -8 / -16 offsets of Q4_0 / Q5_0, the +128 bias of IQ4_NL)
  int8_t qs[kQkSmall];
};

TG_ISA_BEGIN

// x [n, in] -> xq [n, in / 32] as ggml's x86 quantize_row_q8_0 / q8_1 (the AVX2 code the
// llama.cpp references ran): amax = max |x|, d = amax / 127, id = amax ? 127 / amax : 0,
// q = round-to-nearest-even(x * id), d stored as F16; s = F16(d * sum q).
void QuantizeActivationsQ8_1(const float* x, int64_t n, int64_t in, BlockQ8_1* xq);

// y = sum over blocks b of the weight block x activation block dot product, llama.cpp's
// vec_dot_*_q8_0 / _q8_1:
//   Q4_0, Q5_0, IQ4_NL: F32(d_w) * d_x * sumi            (sumi exact, offsets included)
//   MXFP4:              Mxfp4HalfScale(e_w) * d_x * sumi  (sumi over the doubled E2M1 table)
//   Q4_1, Q5_1:         F32(d_w) * d_x * sumi + F32(m_w) * s_x
void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1);

// xq [n, nb] repacked for weights of type t, when this level's kernels read a packed layout
// (AVX-512 VNNI: per pair of blocks 16 int32 lanes of 4 values, values 16p .. 16p + 15 of the
// pair's block h in lanes 8p + 4h .. 8p + 4h + 3, s_x in a block's first lane and 0 in the
// others); false, nothing written, otherwise (and for Q4_0, whose AVX-512 VNNI kernel reads the
// Q8_1 blocks as they are: engine/ops/quant_columns.h). Once per call: per thread range it was
// ~11% of Q4_0 prefill (Ice Lake).
bool PackSmallQuantInt8(WeightType t, const BlockQ8_1* xq, int64_t n, int64_t nb,
                        PackedActivations* packed);

// GemvSmallQuantInt8 on activation rows [i0, i0 + n) of a call whose blocks are xq [rows, nb]
// and, if PackSmallQuantInt8 returned true, packed (else null); y points at row i0's output.
void GemvSmallQuantInt8Packed(const WeightView& w, const BlockQ8_1* xq,
                              const PackedActivations* packed, int64_t i0, int64_t n, float* y,
                              int64_t ldy, int64_t r0, int64_t r1);

// Portable C++ versions (same integer sums; float summation order may differ), exposed so that
// the tests compare them with the SIMD path on every machine.
namespace portable {
void QuantizeActivationsQ8_1(const float* x, int64_t n, int64_t in, BlockQ8_1* xq);
void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_QUANT_DOT_SMALL_H_
