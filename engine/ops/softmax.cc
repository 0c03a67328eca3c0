#include "engine/ops/softmax.h"

#include <cassert>
#include <cmath>
#include <vector>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN

void Softmax(float* x, int64_t n) {
  assert(n >= 1);
  const float max = simd::Max(x, n);
  const double sum = simd::ExpShiftSum(x, n, max);
  simd::Scale(x, n, static_cast<float>(1.0 / sum));
}

double LogSumExp(const float* x, int64_t n) {
  assert(n >= 1);
  const float max = simd::Max(x, n);
  // Exponentials need a buffer; the vocabulary row is small next to the logits matmul.
  thread_local std::vector<float> tmp;
  tmp.assign(x, x + n);
  const double sum = simd::ExpShiftSum(tmp.data(), n, max);
  return static_cast<double>(max) + std::log(sum);
}

void LogSoftmax(const float* x, int64_t n, double* out) {
  const double lse = LogSumExp(x, n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(x[i]) - lse;
}

int64_t ArgMax(const float* x, int64_t n) {
  assert(n >= 1);
  // Two vectorized passes (max, then its first occurrence) beat one branchy scalar pass.
  const float max = simd::Max(x, n);
  int64_t i = 0;
#if defined(__AVX512F__)
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

TG_ISA_END
}  // namespace textgen::ops
