#include "engine/ops/softmax.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace softmax_test {

using testing::Random;

std::vector<double> RefLogSoftmax(const std::vector<float>& x) {
  double max = -INFINITY;
  for (float v : x) max = std::max(max, static_cast<double>(v));
  double sum = 0.0;
  for (float v : x) sum += std::exp(v - max);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - max - std::log(sum);
  return out;
}

TEST_CASE("Softmax matches a double reference") {
  for (int64_t n : {1, 5, 16, 33, 512, 32000}) {
    std::vector<float> x = Random(n, n, -30.0f, 30.0f);
    const std::vector<double> ref = RefLogSoftmax(x);
    Softmax(x.data(), n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(x[i] == Approx(std::exp(ref[i])).epsilon(1e-5).margin(1e-30));
      total += x[i];
    }
    CHECK(total == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("Softmax handles huge and -inf logits") {
  std::vector<float> x = {1e30f, -INFINITY, 1e30f, -1e30f};
  Softmax(x.data(), 4);
  CHECK(x[0] == Approx(0.5));
  CHECK(x[1] == 0.0f);
  CHECK(x[2] == Approx(0.5));
  CHECK(x[3] == 0.0f);
}

TEST_CASE("LogSoftmax matches a double reference to 1e-6 absolute") {
  for (int64_t n : {1, 2, 17, 512, 32000, 128256}) {
    const std::vector<float> x = Random(n, 7 * n, -40.0f, 25.0f);
    const std::vector<double> ref = RefLogSoftmax(x);
    std::vector<double> out(n);
    LogSoftmax(x.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) REQUIRE(out[i] == Approx(ref[i]).margin(1e-6));
    double lse_ref = x[0] - ref[0];
    CHECK(LogSumExp(x.data(), n) == Approx(lse_ref).margin(1e-6));
  }
}

TEST_CASE("ArgMax returns the lowest index among ties") {
  const std::vector<float> a = {1, 3, 2, 3, -1};
  CHECK(ArgMax(a.data(), 5) == 1);
  const std::vector<float> b = {-INFINITY, -INFINITY};
  CHECK(ArgMax(b.data(), 2) == 0);
  const std::vector<float> c = {NAN, -5, 7, NAN, 7};
  CHECK(ArgMax(c.data(), 5) == 2);
  const std::vector<float> d = {0.5f};
  CHECK(ArgMax(d.data(), 1) == 0);
}

// Issue #32: every level's Softmax, LogSumExp, LogSoftmax and ArgMax give the portable form's
// bytes (scripts/test-isa-levels.sh runs this at each level the CPU has), with logits from a
// narrow and a wide range, NaN, infinities and huge values mixed in.
TEST_CASE(
    "Softmax, LogSumExp, LogSoftmax and ArgMax give the portable kernel's bytes at this "
    "level") {
  for (int64_t n : testing::OneOrderLengths()) {
    for (int variant = 0; variant < 3; ++variant) {
      INFO("n " << n << " variant " << variant);
      const float range = variant == 0 ? 5.0f : 60.0f;
      std::vector<float> x =
          testing::RandomWithSpecials(n, n * 3 + variant, -range, range, variant == 2);
      std::vector<float> got = x, want = x;
      Softmax(got.data(), n);
      portable::Softmax(want.data(), n);
      CHECK(testing::SameBytesUpToNaN(got, want));
      const double lse = LogSumExp(x.data(), n), lse_want = portable::LogSumExp(x.data(), n);
      CHECK(testing::SameBytesUpToNaN(lse, lse_want));
      std::vector<double> lp(n), lp_want(n);
      LogSoftmax(x.data(), n, lp.data());
      portable::LogSoftmax(x.data(), n, lp_want.data());
      CHECK(testing::SameBytesUpToNaN(lp, lp_want));
      CHECK(ArgMax(x.data(), n) == portable::ArgMax(x.data(), n));
      // Ties between +0 and -0 as the maximum, and an all-NaN row.
      std::vector<float> zeros(n);
      for (int64_t i = 0; i < n; ++i) zeros[i] = (i % 3 == 1) ? 0.0f : -0.0f;
      CHECK(ArgMax(zeros.data(), n) == portable::ArgMax(zeros.data(), n));
      const std::vector<float> nans(n, NAN);
      CHECK(ArgMax(nans.data(), n) == portable::ArgMax(nans.data(), n));
    }
  }
}

}  // namespace softmax_test
}  // namespace textgen::ops
