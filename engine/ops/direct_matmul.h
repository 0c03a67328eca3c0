// Single-threaded F32 matmul by AVX-512 dot products, for the small calls where oneDNN's
// per-call cost would dominate (decode of tiny models: (64 x 64) weights take ~0.1 us here).
// GemvMatmul serves F32 weights through it; attention uses it for the scores of a block.
#ifndef TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"

namespace textgen::ops {
TG_ISA_BEGIN

// y[n, out] = x[n, in] · Wᵀ for W [out, in] row-major. Any n, but it does not block for
// cache, so it is meant for n <= ~8. F32 products and accumulation (16 partial sums per dot).
void DirectMatmulF32(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y);
// As DirectMatmulF32 with rows of y ldy >= out floats apart (y [n, ldy]); used by attention
// for the scores of one cache block.
void DirectMatmulF32Strided(const float* w, int64_t out, int64_t in, const float* x, int64_t n,
                            float* y, int64_t ldy);

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_
