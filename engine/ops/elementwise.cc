#include "engine/ops/elementwise.h"

#include <cassert>
#include <cmath>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// sum_i x[i]^2 in double. The products are exact in double (24-bit mantissas), so only the
// additions round, as in ggml's ggml_float loop (the order differs: 16 lanes here).
double SumSquares(const float* x, int64_t d) {
#if defined(__AVX512F__)
  __m512d acc0 = _mm512_setzero_pd();
  __m512d acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
    acc0 = _mm512_fmadd_pd(lo, lo, acc0);
    acc1 = _mm512_fmadd_pd(hi, hi, acc1);
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
  for (; i < d; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
#else
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
#endif
}

}  // namespace

void RmsNorm(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out) {
  assert(d >= 1 && n >= 0);
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * d;
    float* o = out + r * d;
    const float mean = static_cast<float>(SumSquares(xr, d) / static_cast<double>(d));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < d; ++i) o[i] = (xr[i] * scale) * w[i];
  }
}

void SiluMul(float* gate, const float* up, int64_t count) {
  assert(count >= 0);
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i < count; i += 16) {
    const __mmask16 m = simd::TailMask(count - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    // g / (1 + e^-g): for g -> -inf, e^-g = inf gives -0, as the scalar formula does.
    const __m512 s =
        _mm512_div_ps(g, _mm512_add_ps(one, simd::Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(s, u));
  }
#else
  for (; i < count; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
#endif
}

void GeluTanhMul(float* gate, const float* up, int64_t count) {
  assert(count >= 0);
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoef * g * g))) * up[i];
  }
}

void AddBias(float* x, int64_t n, int64_t d, const float* bias) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < d; ++i) x[r * d + i] += bias[i];
  }
}

void SoftCap(float* x, int64_t count, float cap) {
  assert(cap > 0.0f);
  for (int64_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void Add(float* acc, const float* x, int64_t count) {
  assert(count >= 0);
  for (int64_t i = 0; i < count; ++i) acc[i] += x[i];  // auto-vectorized
}

TG_ISA_END
}  // namespace textgen::ops
