// Conversion of weight rows from their stored type to F32 or BF16, for the paths that want a
// plain float matrix (oneDNN's GEMM for prefill, which reads BF16 or F32 weights). Decode
// should not use this: engine/ops/q8_0_gemv.h and gemv_float.h read the stored bytes directly.
//
// Rows [r0, r1) of `w` (any WeightType) go to dst [(r1 - r0), w.in], rows contiguous.
// Single-threaded; arguments trusted (0 <= r0 <= r1 <= w.out, dst not overlapping w.data);
// several threads may convert disjoint row ranges at once.
#ifndef TEXTGEN_ENGINE_OPS_WEIGHT_CONVERT_H_
#define TEXTGEN_ENGINE_OPS_WEIGHT_CONVERT_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// Exact for every source type: F16 and BF16 widen exactly, Q8_0 gives F32(d) * q (exact).
void ConvertRowsF32(const WeightView& w, int64_t r0, int64_t r1, float* dst);

// BF16 bits, rounded to nearest even from the exact F32 value (BF16 sources are copied).
// Subnormal results are kept and NaN stays NaN, bit for bit as engine/format/dtype.h's
// F32ToBF16; the AVX-512 BF16 instruction VCVTNEPS2BF16 would flush subnormals to zero, so
// the rounding is done with integer operations instead.
void ConvertRowsBf16(const WeightView& w, int64_t r0, int64_t r1, uint16_t* dst);

// Portable C++ versions (used when the build lacks AVX-512; exposed for the tests).
namespace portable {
void ConvertRowsF32(const WeightView& w, int64_t r0, int64_t r1, float* dst);
void ConvertRowsBf16(const WeightView& w, int64_t r0, int64_t r1, uint16_t* dst);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_WEIGHT_CONVERT_H_
