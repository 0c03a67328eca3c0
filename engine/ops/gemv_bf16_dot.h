// Decode-path kernel for BF16 weights with BF16 activations (LinearCompute::kBf16): the
// AVX512-BF16 dot-product instruction multiplies 32 weight/activation pairs and adds them into
// 16 F32 lanes, so a 64-byte line of weights costs one instruction per activation row.
//
// Why not GemvBf16 (F32 activations, weights widened in registers): widening costs three
// instructions per 16 weights, and at that density the core keeps too few loads in flight to
// stream BF16 weights from DRAM at full speed (stories110M decode: ~23 of 33.7 GB/s). Rounding
// the activations to BF16 is what kBf16 already does for prefill (oneDNN's BF16 matmul).
//
// Row-range contract as engine/ops/gemv_float.h: y[i * ldy + r] for r in [r0, r1), i < n;
// xb [n, in] BF16 activations (ToBf16Activations), F32 accumulation.
#ifndef TEXTGEN_ENGINE_OPS_GEMV_BF16_DOT_H_
#define TEXTGEN_ENGINE_OPS_GEMV_BF16_DOT_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

// x [n, in] F32 -> xb [n, in] BF16, round to nearest even.
void ToBf16Activations(const float* x, int64_t count, uint16_t* xb);

void GemvBf16Dot(const WeightView& w, const uint16_t* xb, int64_t n, float* y, int64_t ldy,
                 int64_t r0, int64_t r1);

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_GEMV_BF16_DOT_H_
