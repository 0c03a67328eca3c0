// Element-wise F32 ops of the Llama block: RMS norm, SwiGLU gate, residual add.
//
// Hot-path helpers: preconditions are asserted, not returned as errors (the model's shapes are
// validated once at load time). Row counts n may be anything >= 0.
#ifndef TEXTGEN_ENGINE_OPS_ELEMENTWISE_H_
#define TEXTGEN_ENGINE_OPS_ELEMENTWISE_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"

namespace textgen::ops {
TG_ISA_BEGIN

// out[n, d] = x[n, d] * (1 / sqrt(mean(x[r]^2) + eps)) * w[d], row by row, d >= 1.
// As ggml: the sum of squares is accumulated in double, the scale is then computed in float
// and applied as (x * scale) * w. out may equal x (in place).
void RmsNorm(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out);

// gate[i] = silu(gate[i]) * up[i] for i < count, with silu(g) = g / (1 + exp(-g)).
// For gate[n, f], up[n, f] pass count = n * f.
void SiluMul(float* gate, const float* up, int64_t count);

// gate[i] = gelu_tanh(gate[i]) * up[i] for i < count (Gemma's GeGLU), with the tanh form
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) computed exactly in float (llama.cpp's CPU
// default rounds it through an F16 table; the exact form matches Hugging Face).
void GeluTanhMul(float* gate, const float* up, int64_t count);

// gpt-oss's clamped SwiGLU (llama.cpp's swiglu_oai): with g = min(gate[i], limit) and
// u = clamp(up[i], -limit, limit), gate[i] = g / (1 + exp(-alpha g)) * (u + 1) for i < count,
// in float with one libm exp, as ggml computes it.
void SwigluOaiMul(float* gate, const float* up, int64_t count, float alpha, float limit);

// x[r, i] += bias[i] for r < n rows of d elements.
void AddBias(float* x, int64_t n, int64_t d, const float* bias);

// x[i] = cap * tanh(x[i] / cap) for i < count (Gemma 2's logit soft-capping), cap > 0.
void SoftCap(float* x, int64_t count, float cap);

// acc[i] += x[i] for i < count (the residual connection; acc[n, d], x[n, d]).
void Add(float* acc, const float* x, int64_t count);

// The portable C++ forms of RmsNorm, SiluMul, GeluTanhMul, SwigluOaiMul and SoftCap
// (simd::Vec16<Portable> lanes): every level's kernels give their bytes (issue #32: the level
// changes speed, never answers); exposed, through the kernel table, so that the tests check each
// level.
namespace portable {
void RmsNorm(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out);
void SiluMul(float* gate, const float* up, int64_t count);
void GeluTanhMul(float* gate, const float* up, int64_t count);
void SwigluOaiMul(float* gate, const float* up, int64_t count, float alpha, float limit);
void SoftCap(float* x, int64_t count, float cap);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_ELEMENTWISE_H_
