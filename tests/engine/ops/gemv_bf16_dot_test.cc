#include "engine/ops/gemv_bf16_dot.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/ops/gemv_matmul.h"
#include "engine/ops/half.h"
#include "engine/ops/threading.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace gemv_bf16_dot_test {

using testing::Random;

TEST_CASE("ToBf16Activations rounds to nearest even and keeps NaN quiet") {
  const float in[] = {
      1.0f, 1.00390625f /* tie: 1 + 2^-8 -> 1 */, 1.01171875f /* tie up */, -3.5f, NAN, INFINITY};
  uint16_t out[6];
  ToBf16Activations(in, 6, out);
  CHECK(out[0] == 0x3f80);
  CHECK(out[1] == 0x3f80);
  CHECK(out[2] == 0x3f82);
  CHECK(half::Bf16ToF32(out[3]) == -3.5f);
  CHECK(std::isnan(half::Bf16ToF32(out[4])));
  CHECK(out[5] == 0x7f80);
  // The vector body (16 at a time) agrees with the scalar tail on the same values.
  const std::vector<float> x = Random(37, 3);
  std::vector<uint16_t> all(37), one(1);
  ToBf16Activations(x.data(), 37, all.data());
  for (int i = 0; i < 37; ++i) {
    ToBf16Activations(&x[i], 1, one.data());
    CHECK(all[i] == one[0]);
  }
}

TEST_CASE("GemvBf16Dot equals the exact product of the BF16 values on row ranges") {
  for (int64_t in : {1, 31, 32, 33, 96, 768, 1000}) {
    const int64_t out = 45;
    const std::vector<float> wf = Random(out * in, 7 + in);
    std::vector<uint16_t> w(out * in);
    ToBf16Activations(wf.data(), out * in, w.data());
    const WeightView view{WeightType::kBf16, w.data(), out, in};
    for (int64_t n : {1, 2, 3, 4, 5, 9}) {
      const std::vector<float> xf = Random(n * in, 11 + n);
      std::vector<uint16_t> x(n * in);
      ToBf16Activations(xf.data(), n * in, x.data());
      const int64_t ldy = out + 3;
      std::vector<float> y(n * ldy, -7.0f);
      const int64_t r0 = 2, r1 = out - 5;
      GemvBf16Dot(view, x.data(), n, y.data(), ldy, r0, r1);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < ldy; ++r) {
          if (r < r0 || r >= r1) {
            CHECK(y[i * ldy + r] == -7.0f);  // outside the range: untouched
            continue;
          }
          double mag = 0;
          const double ref =
              testing::Bf16DotReference(x.data() + i * in, w.data() + r * in, in, &mag);
          INFO("in " << in << " n " << n << " row " << r);
          CHECK(std::fabs(y[i * ldy + r] - ref) <= 1e-6 * mag + 1e-30);
        }
      }
    }
  }
}

TEST_CASE("GemvMatmul's two forms of BF16 dot products: exact products, invariant rows") {
  // VDPBF16PS (where the level has it) and F32 FMAs on widened activations (every level):
  // each must give exact BF16 x BF16 products summed in F32, and each row's bytes must not
  // depend on the row count, the row's place or the thread count (Bf16DotInF32 picks one per
  // process; the other is reached only here).
  const int64_t out = 75, in = 520, rows = 40;
  const std::vector<float> wf = Random(out * in, 21);
  std::vector<uint16_t> w(out * in);
  ToBf16Activations(wf.data(), out * in, w.data());
  const WeightView view{WeightType::kBf16, w.data(), out, in};
  const std::vector<float> x = Random(rows * in, 22);
  std::vector<uint16_t> xb(rows * in);
  ToBf16Activations(x.data(), rows * in, xb.data());
  const int saved = NumThreads();
  for (bool in_f32 : {false, true}) {
    INFO((in_f32 ? "f32 fma" : "vdpbf16ps"));
    const GemvMatmul gemv(view, LinearCompute::kBf16, /*parallel_min_bytes=*/0, in_f32);
    CHECK((gemv.Name().find("bf16-in-f32") != std::string::npos) == in_f32);
    SetNumThreads(1);
    std::vector<float> solo(rows * out);
    for (int64_t i = 0; i < rows; ++i) {
      REQUIRE(gemv.Run(x.data() + i * in, 1, solo.data() + i * out).ok());
      for (int64_t r = 0; r < out; ++r) {
        double mag = 0;
        const double ref =
            testing::Bf16DotReference(xb.data() + i * in, w.data() + r * in, in, &mag);
        CHECK(std::fabs(solo[i * out + r] - ref) <= 1e-6 * mag + 1e-30);
      }
    }
    for (int threads : {1, 2}) {
      SetNumThreads(threads);
      for (int64_t n : {3, 16, 37}) {
        for (int64_t first : {int64_t{0}, rows - n}) {
          std::vector<float> y(n * out);
          REQUIRE(gemv.Run(x.data() + first * in, n, y.data()).ok());
          INFO(threads << " threads, " << n << " rows from " << first);
          CHECK(std::memcmp(y.data(), solo.data() + first * out, y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  SetNumThreads(saved);
}

}  // namespace gemv_bf16_dot_test
}  // namespace textgen::ops
