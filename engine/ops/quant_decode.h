// Widening of ggml block-format weight rows (Q4_0 ... IQ4_XS, engine/format/quant_blocks.h) to
// F32 on the kernel side: the exact GEMV widens each row through it, and the prefill paths
// widen tiles of rows through ConvertRowsF32 / ConvertRowsBf16 (engine/ops/weight_convert.h).
//
// The values are bit for bit those of engine/format/dequantize.h (ggml's dequantize_row_*;
// tests/engine/ops/quant_decode_test.cc compares the two): the scalar path (portable::) runs
// the same header-only arithmetic (engine/format/quant_dequantize_inl.h; the ops room does not
// link the format room), and on AVX2 / AVX-512 builds the SIMD widening of
// engine/ops/quant_unpack.h; both compiled without FMA contraction to keep ggml's rounding.
#ifndef TEXTGEN_ENGINE_OPS_QUANT_DECODE_H_
#define TEXTGEN_ENGINE_OPS_QUANT_DECODE_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// `n` values (a multiple of WeightBlockSize(type)) of the blocks at `src` (any alignment) into
// dst [n]. `type` is one of the IsKQuantFamily formats. Single-threaded, no state.
void DecodeRowF32(WeightType type, const uint8_t* src, float* dst, int64_t n);

// The same values rounded to BF16 bits (to nearest even, as half::F32ToBf16) into dst [n].
void DecodeRowBf16(WeightType type, const uint8_t* src, uint16_t* dst, int64_t n);

namespace portable {
void DecodeRowF32(WeightType type, const uint8_t* src, float* dst, int64_t n);
void DecodeRowBf16(WeightType type, const uint8_t* src, uint16_t* dst, int64_t n);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_QUANT_DECODE_H_
