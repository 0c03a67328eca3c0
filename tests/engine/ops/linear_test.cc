#include "engine/ops/linear.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "engine/ops/threading.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace linear_test {

using testing::Random;

// Checks y [n, out] against a double-precision x · Wᵀ. The bound is relative to
// sum_k |x_k w_k| (the scale of the rounding errors), so cancellation cannot fail it.
void ExpectMatches(const std::vector<float>& w, int64_t out, int64_t in,
                   const std::vector<float>& x, int64_t n, const std::vector<float>& y,
                   double rel_tol) {
  int64_t bad = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < out; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        const double p = static_cast<double>(x[r * in + k]) * w[j * in + k];
        ref += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(y[r * out + j] - ref);
      if (err > rel_tol * mag + 1e-30) {
        if (bad++ < 3) {
          FAIL_CHECK("row " << r << " col " << j << ": got " << y[r * out + j] << " want " << ref
                            << " (mag " << mag << ")");
        }
      }
    }
  }
  CHECK(bad == 0);
}

struct Shape {
  int64_t out, in;
};

TEST_CASE("Linear matches a double reference for many shapes and row counts") {
  const Shape shapes[] = {{1, 1},    {3, 5},    {16, 16},  {17, 33},   {64, 64},
                          {172, 64}, {64, 172}, {512, 64}, {100, 300}, {257, 1000}};
  const LinearKernel kernels[] = {LinearKernel::kAuto, LinearKernel::kOneDnn, LinearKernel::kGemv};
  for (const Shape& s : shapes) {
    const std::vector<float> w = Random(s.out * s.in, 1 + s.out * 7 + s.in);
    for (LinearKernel kernel : kernels) {
      LinearOptions opts;
      opts.kernel = kernel;
      auto linear = Linear::Create(w.data(), s.out, s.in, opts);
      REQUIRE(linear.ok());
      for (int64_t n : {1, 2, 3, 7, 16, 128}) {
        INFO("shape [" << s.out << ", " << s.in << "] n=" << n << " kernel "
                       << (*linear)->KernelName(n));
        const std::vector<float> x = Random(n * s.in, 99 + n);
        std::vector<float> y(n * s.out, NAN);
        REQUIRE((*linear)->Forward(x.data(), n, y.data()).ok());
        ExpectMatches(w, s.out, s.in, x, n, y, 1e-5);
      }
    }
  }
}

TEST_CASE("Linear kAuto picks the GEMV kernels for small calls only, unless batch-invariant") {
  const std::vector<float> w = Random(64 * 64, 3);
  LinearOptions fast;
  fast.batch_invariant = false;
  auto linear = Linear::Create(w.data(), 64, 64, fast);
  REQUIRE(linear.ok());
  CHECK((*linear)->KernelName(1) == "gemv:f32:f32");
  CHECK((*linear)->KernelName(4) == "gemv:f32:f32");
  CHECK((*linear)->KernelName(128).rfind("onednn:", 0) == 0);
  auto invariant = Linear::Create(w.data(), 64, 64);  // the default
  REQUIRE(invariant.ok());
  CHECK((*invariant)->KernelName(1) == "gemv:f32:f32");
  CHECK((*invariant)->KernelName(128) == "gemv:f32:f32");
}

TEST_CASE("Linear with copy_weights does not read the caller's buffer after Create") {
  std::vector<float> w = Random(40 * 24, 5);
  const std::vector<float> keep = w;
  LinearOptions opts;
  opts.copy_weights = true;
  for (LinearKernel kernel : {LinearKernel::kGemv, LinearKernel::kOneDnn}) {
    opts.kernel = kernel;
    std::vector<float> tmp = keep;
    auto linear = Linear::Create(tmp.data(), 40, 24, opts);
    REQUIRE(linear.ok());
    std::fill(tmp.begin(), tmp.end(), 1e30f);
    tmp = std::vector<float>();
    const std::vector<float> x = Random(3 * 24, 6);
    std::vector<float> y(3 * 40);
    REQUIRE((*linear)->Forward(x.data(), 3, y.data()).ok());
    ExpectMatches(keep, 40, 24, x, 3, y, 1e-5);
  }
}

TEST_CASE("Linear BF16 compute is close to the reference") {
  const int64_t out = 96, in = 200;
  const std::vector<float> w = Random(out * in, 8);
  LinearOptions opts;
  opts.compute = LinearCompute::kBf16;
  auto linear = Linear::Create(w.data(), out, in, opts);
  REQUIRE(linear.ok());
  for (int64_t n : {1, 5, 64}) {
    const std::vector<float> x = Random(n * in, 9);
    std::vector<float> y(n * out);
    REQUIRE((*linear)->Forward(x.data(), n, y.data()).ok());
    // Two BF16 roundings per product (2^-8 each).
    ExpectMatches(w, out, in, x, n, y, 1e-2);
  }
}

TEST_CASE("Linear rejects bad arguments") {
  const std::vector<float> w(16, 1.0f);
  CHECK(Linear::Create(nullptr, 4, 4).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Linear::Create(w.data(), 0, 4).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Linear::Create(w.data(), 4, -1).status().code() == absl::StatusCode::kInvalidArgument);
  const std::vector<uint8_t> q(34 * 4);
  CHECK(Linear::Create(WeightView{WeightType::kQ8_0, q.data(), 4, 33}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(Linear::Create(WeightView{WeightType::kF16, nullptr, 4, 4}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto linear = Linear::Create(w.data(), 4, 4);
  REQUIRE(linear.ok());
  std::vector<float> x(4), y(4);
  CHECK((*linear)->Forward(x.data(), 0, y.data()).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*linear)->Forward(nullptr, 1, y.data()).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*linear)->Forward(x.data(), 1, nullptr).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Linear Forward is safe from concurrent threads") {
  const int64_t out = 300, in = 128;
  const std::vector<float> w = Random(out * in, 11);
  for (LinearKernel kernel : {LinearKernel::kOneDnn, LinearKernel::kGemv}) {
    LinearOptions opts;
    opts.kernel = kernel;
    auto created = Linear::Create(w.data(), out, in, opts);
    REQUIRE(created.ok());
    const Linear& linear = **created;
    std::vector<int> failures(2, 0);
    auto worker = [&](int id) {
      for (int iter = 0; iter < 50; ++iter) {
        const int64_t n = (iter % 2 == 0) ? 1 + id : 40 + id;
        const std::vector<float> x = Random(n * in, 1000 * id + iter);
        std::vector<float> y(n * out);
        if (!linear.Forward(x.data(), n, y.data()).ok()) {
          ++failures[id];
          continue;
        }
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t j = 0; j < out; j += 37) {
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < in; ++k) {
              const double p = static_cast<double>(x[r * in + k]) * w[j * in + k];
              ref += p;
              mag += std::fabs(p);
            }
            if (std::fabs(y[r * out + j] - ref) > 1e-5 * mag) ++failures[id];
          }
        }
      }
    };
    std::thread t0(worker, 0), t1(worker, 1);
    t0.join();
    t1.join();
    CHECK(failures[0] == 0);
    CHECK(failures[1] == 0);
  }
}

TEST_CASE("Linear gives the same results with 1 and 2 threads") {
  const int64_t out = 512, in = 256, n = 64;
  const std::vector<float> w = Random(out * in, 12);
  const std::vector<float> x = Random(n * in, 13);
  LinearOptions opts;
  opts.kernel = LinearKernel::kOneDnn;
  auto linear = Linear::Create(w.data(), out, in, opts);
  REQUIRE(linear.ok());
  const int saved = NumThreads();
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    std::vector<float> y(n * out);
    REQUIRE((*linear)->Forward(x.data(), n, y.data()).ok());
    ExpectMatches(w, out, in, x, n, y, 1e-5);
  }
  SetNumThreads(saved);
  CHECK(RecommendedNumThreads(512 * 64) == 1);
}

}  // namespace linear_test
}  // namespace textgen::ops
