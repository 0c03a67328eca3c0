#include "engine/ops/amx_matmul.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <thread>
#include <vector>

#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/half.h"
#include "engine/ops/threading.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace amx_matmul_test {

using testing::Random;

// Weights [out, in] as BF16 bits, drawn from `seed`.
std::vector<uint16_t> RandomBf16(int64_t out, int64_t in, uint32_t seed) {
  const std::vector<float> wf = Random(static_cast<size_t>(out * in), seed);
  std::vector<uint16_t> w(wf.size());
  ToBf16Activations(wf.data(), static_cast<int64_t>(wf.size()), w.data());
  return w;
}

// Checks y [n, out] against the exact product, in double, of the BF16 values of x and w.
// Tolerance: F32 accumulation over `in` terms, relative to the sum of |products|.
void CheckAgainstReference(const std::vector<float>& x, const std::vector<uint16_t>& w, int64_t n,
                           int64_t out, int64_t in, const std::vector<float>& y) {
  std::vector<uint16_t> xb(x.size());
  ToBf16Activations(x.data(), static_cast<int64_t>(x.size()), xb.data());
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < out; ++r) {
      double mag = 0;
      const double ref = testing::Bf16DotReference(xb.data() + i * in, w.data() + r * in, in, &mag);
      const double err = std::fabs(y[i * out + r] - ref);  // NaN if y was never written
      if (!(err <= 1e-5 * mag + 1e-30) && bad++ < 5) {
        INFO("n " << n << " out " << out << " in " << in << " y[" << i << ", " << r
                  << "] = " << y[i * out + r] << ", reference " << ref);
        CHECK(err <= 1e-5 * mag + 1e-30);
      }
    }
  }
  INFO("n " << n << " out " << out << " in " << in);
  CHECK(bad == 0);
}

bool SkipWithoutAmx() {
  if (AmxBf16Matmul::Available()) return false;
  WARN("AMX-BF16 not available on this CPU or build: AmxBf16Matmul tests skipped");
  return true;
}

TEST_CASE("AmxBf16Matmul equals the exact product of the BF16 values for every shape") {
  if (SkipWithoutAmx()) return;
  // Threads on (parallel_min_bytes 0) so ranges of output blocks split; the tails of n
  // (rows % 16), out (% 16) and in (% 32) each get a case.
  const int saved_threads = NumThreads();
  SetNumThreads(2);
  for (int64_t in : {1, 31, 32, 33, 96, 768, 2048}) {
    for (int64_t out : {1, 15, 16, 17, 100, 1000}) {
      const std::vector<uint16_t> w = RandomBf16(out, in, static_cast<uint32_t>(out * 7 + in));
      auto mm =
          AmxBf16Matmul::Create({WeightType::kBf16, w.data(), out, in}, /*parallel_min_bytes=*/0);
      REQUIRE(mm.ok());
      for (int64_t n : {1, 2, 15, 16, 17, 33, 128}) {
        // Large shapes only with a few n: the double reference is the slow part.
        if (out * in >= 768 * 1000 && n != 1 && n != 17 && n != 128) continue;
        const std::vector<float> x = Random(static_cast<size_t>(n * in), static_cast<uint32_t>(n));
        std::vector<float> y(static_cast<size_t>(n * out), NAN);
        REQUIRE((*mm)->Run(x.data(), n, y.data()).ok());
        CheckAgainstReference(x, w, n, out, in, y);
      }
    }
  }
  SetNumThreads(saved_threads);
}

TEST_CASE("AmxBf16Matmul writes exactly the n x out outputs and nothing around them") {
  if (SkipWithoutAmx()) return;
  const int64_t out = 17, in = 33, n = 17;
  const std::vector<uint16_t> w = RandomBf16(out, in, 5);
  auto mm = AmxBf16Matmul::Create({WeightType::kBf16, w.data(), out, in});
  REQUIRE(mm.ok());
  const std::vector<float> x = Random(static_cast<size_t>(n * in), 6);
  std::vector<float> y(static_cast<size_t>(n * out + 64), -7.0f);
  REQUIRE((*mm)->Run(x.data(), n, y.data()).ok());
  for (size_t i = static_cast<size_t>(n * out); i < y.size(); ++i) CHECK(y[i] == -7.0f);
  CHECK((*mm)->packed_bytes() == 2 * 2 * 1024);  // 2 output blocks x 2 k blocks of 1 KiB
}

TEST_CASE("AmxBf16Matmul::Run is safe from two threads at once") {
  if (SkipWithoutAmx()) return;
  const int64_t out = 300, in = 200;
  const std::vector<uint16_t> w = RandomBf16(out, in, 9);
  auto mm = AmxBf16Matmul::Create({WeightType::kBf16, w.data(), out, in}, 0);
  REQUIRE(mm.ok());
  // Each thread has its own rows and expected results (computed single-threaded first).
  const int64_t rows[2] = {3, 40};
  std::vector<float> x[2], want[2], got[2];
  for (int t = 0; t < 2; ++t) {
    x[t] = Random(static_cast<size_t>(rows[t] * in), 20 + t);
    want[t].resize(static_cast<size_t>(rows[t] * out));
    REQUIRE((*mm)->Run(x[t].data(), rows[t], want[t].data()).ok());
    got[t].resize(want[t].size());
  }
  bool ok[2] = {true, true};
  auto worker = [&](int t) {
    for (int iter = 0; iter < 200 && ok[t]; ++iter) {
      std::fill(got[t].begin(), got[t].end(), NAN);
      ok[t] = (*mm)->Run(x[t].data(), rows[t], got[t].data()).ok() && got[t] == want[t];
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  CHECK(ok[0]);
  CHECK(ok[1]);
}

TEST_CASE("AmxBf16Matmul::Create rejects bad weights") {
  const std::vector<uint16_t> w(64, 0);
  CHECK(AmxBf16Matmul::Create({WeightType::kBf16, nullptr, 4, 16}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(AmxBf16Matmul::Create({WeightType::kBf16, w.data(), 0, 16}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(AmxBf16Matmul::Create({WeightType::kF16, w.data(), 4, 16}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  const auto status = AmxBf16Matmul::Create({WeightType::kBf16, w.data(), 4, 16}).status();
  CHECK(status.code() == (AmxBf16Matmul::Available() ? absl::StatusCode::kOk
                                                     : absl::StatusCode::kFailedPrecondition));
}

}  // namespace amx_matmul_test
}  // namespace textgen::ops
