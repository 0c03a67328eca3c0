#include "engine/ops/softmax.h"

#include <catch2/catch.hpp>
#include <cmath>
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

}  // namespace softmax_test
}  // namespace textgen::ops
