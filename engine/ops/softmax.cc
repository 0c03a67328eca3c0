#include "engine/ops/softmax.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

template <typename Isa>
void SoftmaxT(float* x, int64_t n) {
  assert(n >= 1);
  const float max = simd::Max<Isa>(x, n);
  const double sum = simd::ExpShiftSum<Isa>(x, n, max);
  simd::Scale<Isa>(x, n, static_cast<float>(1.0 / sum));
}

template <typename Isa>
double LogSumExpT(const float* x, int64_t n) {
  assert(n >= 1);
  const float max = simd::Max<Isa>(x, n);
  // Exponentials need a buffer; the vocabulary row is small next to the logits matmul.
  thread_local std::vector<float> tmp;
  tmp.assign(x, x + n);
  const double sum = simd::ExpShiftSum<Isa>(tmp.data(), n, max);
  return static_cast<double>(max) + std::log(sum);
}

template <typename Isa>
void LogSoftmaxT(const float* x, int64_t n, double* out) {
  const double lse = LogSumExpT<Isa>(x, n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(x[i]) - lse;
}

// The first i with x[i] == max (the maximum is the same at every level, so is the index).
int64_t FirstEqual(const float* x, int64_t n, float max) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // Two vectorized passes (max, then its first occurrence) beat one branchy scalar pass.
  const __m512 vm = _mm512_set1_ps(max);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vm, _CMP_EQ_OQ);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
#endif
  for (; i < n; ++i) {
    if (x[i] == max) return i;
  }
  return 0;  // all NaN
}

}  // namespace

void Softmax(float* x, int64_t n) { SoftmaxT<simd::Native>(x, n); }
double LogSumExp(const float* x, int64_t n) { return LogSumExpT<simd::Native>(x, n); }
void LogSoftmax(const float* x, int64_t n, double* out) { LogSoftmaxT<simd::Native>(x, n, out); }
int64_t ArgMax(const float* x, int64_t n) {
  assert(n >= 1);
  return FirstEqual(x, n, simd::Max(x, n));
}

namespace portable {

void Softmax(float* x, int64_t n) { SoftmaxT<simd::Portable>(x, n); }
double LogSumExp(const float* x, int64_t n) { return LogSumExpT<simd::Portable>(x, n); }
void LogSoftmax(const float* x, int64_t n, double* out) { LogSoftmaxT<simd::Portable>(x, n, out); }
int64_t ArgMax(const float* x, int64_t n) {
  assert(n >= 1);
  const float max = simd::Max<simd::Portable>(x, n);
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == max) return i;
  }
  return 0;  // all NaN
}

}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

namespace textgen::ops::internal {
TG_ISA_BEGIN

float SimdDot(const float* a, const float* b, int64_t n) { return simd::Dot(a, b, n); }
void SimdAxpy(float alpha, const float* x, float* y, int64_t n) { simd::Axpy(alpha, x, y, n); }
namespace portable {
float SimdDot(const float* a, const float* b, int64_t n) {
  return simd::Dot<simd::Portable>(a, b, n);
}
void SimdAxpy(float alpha, const float* x, float* y, int64_t n) {
  simd::Axpy<simd::Portable>(alpha, x, y, n);
}
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops::internal
