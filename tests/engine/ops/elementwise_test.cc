#include "engine/ops/elementwise.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace elementwise_test {

using testing::Random;

TEST_CASE("RmsNorm matches a double reference") {
  for (int64_t d : {1, 7, 16, 64, 100, 4096}) {
    const int64_t n = 3;
    const std::vector<float> x = Random(n * d, d, -3.0f, 3.0f);
    const std::vector<float> w = Random(d, d + 1, 0.5f, 1.5f);
    const float eps = 1e-5f;
    std::vector<float> out(n * d);
    RmsNorm(x.data(), n, d, w.data(), eps, out.data());
    for (int64_t r = 0; r < n; ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
      const double scale = 1.0 / std::sqrt(ss / d + eps);
      for (int64_t i = 0; i < d; ++i) {
        const double ref = x[r * d + i] * scale * w[i];
        REQUIRE(out[r * d + i] == Approx(ref).epsilon(1e-6).margin(1e-7));
      }
    }
    // In place gives the same bytes.
    std::vector<float> inplace = x;
    RmsNorm(inplace.data(), n, d, w.data(), eps, inplace.data());
    CHECK(inplace == out);
  }
}

TEST_CASE("SiluMul matches a double reference, including large magnitudes") {
  for (int64_t count : {1, 15, 16, 17, 172, 1000}) {
    std::vector<float> gate = Random(count, count, -20.0f, 20.0f);
    if (count > 3) {
      gate[0] = -100.0f;
      gate[1] = 100.0f;
      gate[2] = 0.0f;
    }
    const std::vector<float> up = Random(count, count + 5, -2.0f, 2.0f);
    const std::vector<float> g0 = gate;
    SiluMul(gate.data(), up.data(), count);
    for (int64_t i = 0; i < count; ++i) {
      const double g = g0[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      REQUIRE(gate[i] == Approx(ref).epsilon(2e-6).margin(1e-30));
    }
  }
}

// Issue #32: the kernel level changes speed, never answers. Each level's kernel (the one this
// process runs: scripts/test-isa-levels.sh caps it at every level the CPU has) must give the
// bytes of the portable form, on random rows of every tail length and real sizes, with NaN,
// infinities, huge and subnormal values mixed in.
TEST_CASE("RmsNorm gives the portable kernel's bytes at this level") {
  for (int64_t d : testing::OneOrderLengths()) {
    for (bool specials : {false, true}) {
      INFO("d " << d << " specials " << specials);
      const int64_t n = d > 4096 ? 1 : 3;
      std::vector<float> x = testing::RandomWithSpecials(n * d, d, -3.0f, 3.0f, specials);
      if (specials && d > 8) x[d / 2] = 1e19f;  // a square beyond F32, fine in double
      const std::vector<float> w = Random(d, d + 1, 0.5f, 1.5f);
      std::vector<float> got(n * d), want(n * d);
      RmsNorm(x.data(), n, d, w.data(), 1e-5f, got.data());
      portable::RmsNorm(x.data(), n, d, w.data(), 1e-5f, want.data());
      CHECK(testing::SameBytesUpToNaN(got, want));
    }
  }
}

TEST_CASE(
    "SiluMul, GeluTanhMul, SwigluOaiMul and SoftCap give the portable kernel's bytes at this "
    "level") {
  for (int64_t count : testing::OneOrderLengths()) {
    for (bool specials : {false, true}) {
      INFO("count " << count << " specials " << specials);
      const std::vector<float> gate =
          testing::RandomWithSpecials(count, count, -30.0f, 30.0f, specials);
      const std::vector<float> up =
          testing::RandomWithSpecials(count, count + 1, -2.0f, 2.0f, specials);
      std::vector<float> got = gate, want = gate;
      SiluMul(got.data(), up.data(), count);
      portable::SiluMul(want.data(), up.data(), count);
      CHECK(testing::SameBytesUpToNaN(got, want));
      got = gate;
      want = gate;
      GeluTanhMul(got.data(), up.data(), count);
      portable::GeluTanhMul(want.data(), up.data(), count);
      CHECK(testing::SameBytesUpToNaN(got, want));
      got = gate;
      want = gate;
      SwigluOaiMul(got.data(), up.data(), count, 1.702f, 7.0f);
      portable::SwigluOaiMul(want.data(), up.data(), count, 1.702f, 7.0f);
      CHECK(testing::SameBytesUpToNaN(got, want));
      got = gate;
      want = gate;
      SoftCap(got.data(), count, 7.5f);
      portable::SoftCap(want.data(), count, 7.5f);
      CHECK(testing::SameBytesUpToNaN(got, want));
    }
  }
}

TEST_CASE("Add accumulates the residual") {
  std::vector<float> acc = {1, 2, 3, 4, 5};
  const std::vector<float> x = {0.5f, -2, 0, 1e-3f, 10};
  Add(acc.data(), x.data(), 5);
  CHECK(acc == std::vector<float>{1.5f, 0, 3, 4.001f, 15});
}

}  // namespace elementwise_test
}  // namespace textgen::ops
