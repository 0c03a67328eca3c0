// Shared by the ops tests.
#ifndef TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace textgen::ops::testing {

// n values drawn uniformly from [lo, hi), reproducibly from `seed`.
inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace textgen::ops::testing

#endif  // TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_
