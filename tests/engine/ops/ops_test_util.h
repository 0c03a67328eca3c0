// Shared by the ops tests.
#ifndef TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/ops/half.h"

namespace textgen::ops::testing {

// n values drawn uniformly from [lo, hi), reproducibly from `seed`.
inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The dot product of BF16 rows x and w [in], exact in double; *mag gets the sum of the
// products' magnitudes (the scale of an F32 summation's rounding).
inline double Bf16DotReference(const uint16_t* x, const uint16_t* w, int64_t in, double* mag) {
  double ref = 0;
  *mag = 0;
  for (int64_t k = 0; k < in; ++k) {
    const double p = static_cast<double>(half::Bf16ToF32(x[k])) * half::Bf16ToF32(w[k]);
    ref += p;
    *mag += std::fabs(p);
  }
  return ref;
}

}  // namespace textgen::ops::testing

#endif  // TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_
