// Shared by the ops tests.
#ifndef TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_OPS_OPS_TEST_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
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

// Random(n, seed, lo, hi) with, when `specials`, about one value in eight replaced by an edge
// case: NaN, +-inf, +-0, huge (up to FLT_MAX), tiny (subnormal) or a large finite value.
inline std::vector<float> RandomWithSpecials(size_t n, uint32_t seed, float lo, float hi,
                                             bool specials) {
  std::vector<float> v = Random(n, seed, lo, hi);
  if (!specials) return v;
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  const float edge[] = {NAN,      INFINITY, -INFINITY, 0.0f,           -0.0f, 3.4028235e38f,
                        -3.0e38f, 1.0e-40f, -1.0e-45f, 1.1754944e-38f, 88.8f, -88.0f,
                        -104.5f,  1.0e30f,  -1.0e30f,  1.0e-30f};
  for (float& x : v) {
    if (rng() % 8 == 0) x = edge[rng() % (sizeof(edge) / sizeof(edge[0]))];
  }
  return v;
}

// The lengths the one-order tests (issue #32) run every kernel at: every tail 1..70, then
// real sizes (head dims, hidden sizes, a vocabulary).
inline std::vector<int64_t> OneOrderLengths() {
  std::vector<int64_t> n;
  for (int64_t i = 1; i <= 70; ++i) n.push_back(i);
  for (int64_t i : {96, 128, 2048, 4096, 11008, 32000}) n.push_back(i);
  return n;
}

// Whether a and b hold the same bytes, any NaN counting as equal to any NaN: IEEE 754 leaves
// which NaN an operation returns open, x86 returns its first NaN operand (or the negative
// default NaN for inf - inf), and which operand of an FMA comes first is the compiler's choice.
template <typename T>
bool SameBytesUpToNaN(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b));
}
template <typename T>
bool SameBytesUpToNaN(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameBytesUpToNaN(a[i], b[i])) return false;
  }
  return true;
}

// Where a and b first differ as SameBytesUpToNaN compares, for a failure message: "" if nowhere.
template <typename T>
std::string FirstByteDifference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!SameBytesUpToNaN(a[i], b[i])) {
      uint64_t ua = 0, ub = 0;
      std::memcpy(&ua, &a[i], sizeof(T));
      std::memcpy(&ub, &b[i], sizeof(T));
      std::ostringstream out;
      out << "index " << i << ": " << a[i] << " (0x" << std::hex << ua << ") vs " << std::dec
          << b[i] << " (0x" << std::hex << ub << ")";
      return out.str();
    }
  }
  return "";
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
