// The shared vector helpers, on the path this test is compiled for: the baseline's (AVX2) in
// the default build, AVX-512 in a single-level build for such a CPU. Their AVX-512 versions
// also run inside the kernels of the avx512 levels, tested at each level by
// scripts/test-isa-levels.sh.
#include "engine/ops/simd.h"

#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/ops/softmax.h"
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

// Issue #32: simd::Dot and simd::Axpy of every level (through the kernel table, at the level
// this process runs) give the portable form's bytes: 32 lanes in a fixed order, one FMA each.
TEST_CASE("simd::Dot and simd::Axpy give the portable kernel's bytes at this level") {
  std::vector<int64_t> lengths = testing::OneOrderLengths();
  lengths.push_back(0);
  for (int64_t n : lengths) {
    for (bool specials : {false, true}) {
      INFO("n " << n << " specials " << specials);
      const std::vector<float> a = testing::RandomWithSpecials(n, 5 * n + 1, -2.0f, 2.0f, specials);
      const std::vector<float> b = testing::RandomWithSpecials(n, 5 * n + 2, -2.0f, 2.0f, specials);
      const float dot = internal::SimdDot(a.data(), b.data(), n);
      const float dot_want = internal::portable::SimdDot(a.data(), b.data(), n);
      CHECK(testing::SameBytesUpToNaN(dot, dot_want));
      std::vector<float> y = b, y_want = b;
      internal::SimdAxpy(-0.3f, a.data(), y.data(), n);
      internal::portable::SimdAxpy(-0.3f, a.data(), y_want.data(), n);
      CHECK(testing::SameBytesUpToNaN(y, y_want));
    }
  }
}

// The exponential written once on Vec16: the baseline's registers (this file's level) give the
// portable lanes' bytes over the whole float range, overflow, subnormal results and NaN included.
TEST_CASE("simd::Exp gives the portable form's bytes over the whole float range") {
  std::vector<float> x;
  for (float v = -110.0f; v < 92.0f; v += 0.00731f) x.push_back(v);
  for (float v : {-103.97f, -103.3f, -87.33f, -87.34f, 88.72f, 88.73f, 0.0f, -0.0f, NAN, INFINITY,
                  -INFINITY, 1e-45f, -1e-45f}) {
    x.push_back(v);
  }
  while (x.size() % 16 != 0) x.push_back(1.0f);
  std::vector<float> got(x.size()), want(x.size());
  for (size_t i = 0; i < x.size(); i += 16) {
    simd::Exp(simd::Vec16<simd::Native>::Load(x.data() + i)).Store(got.data() + i);
    simd::Exp(simd::Vec16<simd::Portable>::Load(x.data() + i)).Store(want.data() + i);
  }
  CHECK(testing::SameBytesUpToNaN(got, want));
}

}  // namespace simd_test
}  // namespace textgen::ops
