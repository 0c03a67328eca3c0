// The shared vector helpers, on the path this test is compiled for: the baseline's (AVX2) in
// the default build, AVX-512 in a single-level build for such a CPU. Their AVX-512 versions
// also run inside the kernels of the avx512 levels, tested at each level by
// scripts/test-isa-levels.sh.
#include "engine/ops/simd.h"

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace simd_test {

using testing::Random;

TEST_CASE("simd::ExpShiftSum is within a few ulp of exp over the whole float range") {
  // -110..92 in steps that hit the ends of the range (overflow, subnormal results, zero).
  std::vector<float> x;
  for (float v = -110.0f; v < 92.0f; v += 0.00731f) x.push_back(v);
  for (float v : {-103.97f, -103.3f, -87.33f, -87.34f, 88.72f, 88.73f, 0.0f, -0.0f}) x.push_back(v);
  std::vector<float> e = x;
  const double sum = simd::ExpShiftSum(e.data(), static_cast<int64_t>(e.size()), 0.0f);
  double want_sum = 0.0;
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    want_sum += e[i];
    bool ok;
    if (ref > FLT_MAX) {
      ok = std::isinf(e[i]) || e[i] >= FLT_MAX * 0.9999f;  // rounds to inf or to the top
    } else if (ref < FLT_MIN) {
      // Subnormal results: one rounding of an almost exact product, so within one subnormal
      // step (2^-149).
      ok = std::fabs(e[i] - ref) <= 0x1p-149;
    } else {
      ok = std::fabs(e[i] - ref) <= 4 * ref * FLT_EPSILON;
    }
    if (!ok && bad++ < 5) FAIL_CHECK("exp(" << x[i] << ") = " << e[i] << ", want " << ref);
  }
  CHECK(bad == 0);
  CHECK(sum == Approx(want_sum).epsilon(1e-12));
}

TEST_CASE("simd::ExpShiftSum writes exactly n values and sums only them") {
  for (int64_t n = 1; n <= 40; ++n) {
    std::vector<float> x = Random(n + 8, 3 + n, -5.0f, 5.0f);
    const std::vector<float> before = x;
    const double sum = simd::ExpShiftSum(x.data(), n, 1.5f);
    double want = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      CHECK(x[i] == Approx(std::exp(before[i] - 1.5f)).epsilon(1e-6));
      want += x[i];
    }
    for (int64_t i = n; i < n + 8; ++i) CHECK(x[i] == before[i]);
    CHECK(sum == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("simd::Max skips NaNs and ignores what lies past n") {
  for (int64_t n = 1; n <= 40; ++n) {
    INFO("n = " << n);
    std::vector<float> x = Random(n + 8, 7 + n);
    for (int64_t i = n; i < n + 8; ++i) x[i] = 100.0f;  // past the end: must not win
    float want = -INFINITY;
    for (int64_t i = 0; i < n; ++i) want = std::max(want, x[i]);
    CHECK(simd::Max(x.data(), n) == want);
    x[n - 1] = NAN;
    if (n > 1) {
      float without = -INFINITY;
      for (int64_t i = 0; i < n - 1; ++i) without = std::max(without, x[i]);
      CHECK(simd::Max(x.data(), n) == without);
    }
  }
  const float nans[] = {NAN, NAN, NAN};
  CHECK(simd::Max(nans, 3) == -INFINITY);
}

TEST_CASE("simd::Dot and simd::Axpy match double references at every tail length") {
  for (int64_t n = 0; n <= 70; ++n) {
    INFO("n = " << n);
    const std::vector<float> a = Random(n + 8, 11 + n);
    const std::vector<float> b = Random(n + 8, 13 + n);
    double want = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(a[i]) * b[i];
      mag += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    CHECK(std::fabs(simd::Dot(a.data(), b.data(), n) - want) <= 1e-6 * mag + 1e-30);
    std::vector<float> y = b;
    simd::Axpy(0.75f, a.data(), y.data(), n);
    for (int64_t i = 0; i < n + 8; ++i) {
      // One FMA or a multiply and an add: within an ulp of the exact value.
      const double exact = i < n ? static_cast<double>(b[i]) + 0.75 * a[i] : b[i];
      CHECK(std::fabs(y[i] - exact) <= 2 * FLT_EPSILON * (std::fabs(exact) + 0.75));
    }
  }
}

}  // namespace simd_test
}  // namespace textgen::ops
