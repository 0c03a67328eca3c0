// Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 int8 kernels (fast mode) against the dequantized
// weights times the F32 activations. The kernels replace each activation x_k by d * q_k of its Q8_1
// block and the block sum by s, so |y - exact| <= sum_k |w_k| |x_k - d q_k| (each term at most
// half a step plus q times the F16 rounding of d), plus, for the formats
// with a min, |m| |s - d sum q| per block, plus F32 rounding.
#include "engine/ops/quant_dot_small.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/ops/half.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace quant_dot_small_test {

TEST_CASE("QuantizeActivationsQ8_1: amax maps to 127, ties to even, sums", "[quant]") {
  std::vector<float> x = testing::Random(96, 5);
  x[3] = -2.54f;  // block 0's largest: d = 0.02
  x[4] = 0.05f;   // 2.5 steps: rounds to even (2)
  for (int k = 32; k < 64; ++k) x[k] = 0.0f;
  std::vector<BlockQ8_1> q(3);
  QuantizeActivationsQ8_1(x.data(), 1, 96, q.data());
  CHECK(q[0].qs[3] == -127);
  CHECK(q[0].qs[4] == 2);
  CHECK(q[0].d == half::F16ToF32(half::F32ToF16(2.54f / 127)));
  for (const BlockQ8_1& b : q) {
    int s = 0;
    for (int8_t v : b.qs) s += v;
    CHECK(b.sum == s);
  }
  CHECK(q[0].s == Approx(q[0].d * q[0].sum).epsilon(2e-3));
  CHECK(q[1].d == 0.0f);
  CHECK(q[1].sum == 0);
  CHECK(q[1].s == 0.0f);
}

TEST_CASE("QuantizeActivationsQ8_1 is bit-identical to the portable version", "[quant]") {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 4; ++trial) {
    const int64_t n = 1 + rng() % 3, in = 32 * (1 + rng() % 20);
    std::vector<float> x = testing::Random(n * in, rng());
    if (trial == 1) {
      // Max 127 gives id = 1: every odd half is a rounding tie (to even in both).
      for (int64_t k = 0; k < n * in; ++k) x[k] = static_cast<float>(k % 255 - 127) * 0.5f;
      for (int64_t k = 0; k < n * in; k += 32) x[k] = 127.0f;
    }
    if (trial == 2) {
      for (int k = 0; k < 32; ++k) x[k] = 0.0f;  // an all-zero block
      x[40 % (n * in)] = -1e-30f;                // a block of one tiny value
    }
    std::vector<BlockQ8_1> a(n * in / 32), b(n * in / 32);
    QuantizeActivationsQ8_1(x.data(), n, in, a.data());
    portable::QuantizeActivationsQ8_1(x.data(), n, in, b.data());
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("trial " << trial << " block " << k);
      CHECK(std::memcmp(&a[k], &b[k], sizeof(BlockQ8_1)) == 0);
    }
  }
}

TEST_CASE("GemvSmallQuantInt8 against dequantize-then-F32, row ranges, SIMD = portable",
          "[quant]") {
  std::mt19937 rng(33);
  for (WeightType t : {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
                       WeightType::kIQ4_NL, WeightType::kMXFP4}) {
    INFO(WeightTypeName(t));
    const bool has_min = t == WeightType::kQ4_1 || t == WeightType::kQ5_1;
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t in = 32 * (1 + rng() % 40), out = 1 + rng() % 45, n = 1 + rng() % 8;
      const int64_t nb = in / 32;
      INFO("in " << in << " out " << out << " n " << n);
      const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
      const std::vector<float> wf = testing::Dequantize(t, data, out * in);
      std::vector<float> x = testing::Random(n * in, rng());
      for (int64_t k = 0; k < 32; ++k) x[k] *= 1e-3f;           // a block of small activations
      for (int64_t k = 32; k < 64 && k < in; ++k) x[k] = 0.0f;  // an all-zero block
      std::vector<BlockQ8_1> xq(n * nb);
      QuantizeActivationsQ8_1(x.data(), n, in, xq.data());
      const WeightView w{t, data.data(), out, in};
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      testing::ExpectRowRange(
          [&](float* y, int64_t ldy, int64_t a, int64_t b) {
            GemvSmallQuantInt8(w, xq.data(), n, y, ldy, a, b);
          },
          n, out + 2, r0, r1, 1.0,
          [&](int64_t i, int64_t r) {
            testing::Expected e;
            double bound = 0;
            for (int64_t k = 0; k < in; ++k) {
              const BlockQ8_1& a = xq[(i * in + k) / 32];
              const double p = static_cast<double>(x[i * in + k]) * wf[r * in + k];
              e.value += p;
              const double dx = std::fabs(x[i * in + k] - double{a.d} * a.qs[k % 32]);
              // Half a step of the F32 scale amax / 127, plus q times its F16 rounding.
              const int64_t b0 = (i * in + k) / 32 * 32;
              double amax = 0;
              for (int l = 0; l < 32; ++l) amax = std::fmax(amax, std::fabs(x[b0 + l]));
              const double d32 = amax / 127;
              CHECK(dx <= 0.5 * d32 * (1 + 1e-6) + 127 * std::fabs(d32 - a.d) + 1e-30);
              bound += std::fabs(wf[r * in + k]) * dx;
              e.mag += std::fabs(p);
            }
            if (has_min) {
              for (int64_t b = 0; b < nb; ++b) {
                uint16_t m;
                std::memcpy(&m, data.data() + (r * nb + b) * WeightBlockBytes(t) + 2, 2);
                const BlockQ8_1& a = xq[i * nb + b];
                bound += std::fabs(half::F16ToF32(m)) * std::fabs(a.s - double{a.d} * a.sum);
              }
            }
            // Expressed on the scale ExpectRowRange uses (rel_tol 1.0 * mag).
            e.mag = bound * 1.001 + 1e-5 * e.mag;
            return e;
          });
      std::vector<float> ya(n * out), yb(n * out);
      GemvSmallQuantInt8(w, xq.data(), n, ya.data(), out, 0, out);
      portable::GemvSmallQuantInt8(w, xq.data(), n, yb.data(), out, 0, out);
      for (size_t k = 0; k < ya.size(); ++k) {
        INFO(k);
        // Same integer sums; only the F32 order of up to 40 block terms differs.
        CHECK(ya[k] == Approx(yb[k]).epsilon(1e-5).margin(2e-5));
      }
    }
  }
}

TEST_CASE("GemvSmallQuantInt8Packed: one packing per call gives every row range's bytes",
          "[quant]") {
  // Linear's path: the activations packed once (at the AVX-512 VNNI level; elsewhere nothing is
  // packed and the unpacked kernel runs), then any activation chunk [i0, i0 + m) and weight row
  // range, with stale bytes in the reused pack from a larger earlier call.
  std::mt19937 rng(35);
  PackedActivations packed;
  for (WeightType t : {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
                       WeightType::kIQ4_NL, WeightType::kMXFP4}) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t in = 32 * (1 + rng() % 40), out = 1 + rng() % 45, n = 1 + rng() % 12;
      const int64_t nb = in / 32;
      INFO("in " << in << " out " << out << " n " << n);
      const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
      const std::vector<float> x = testing::Random(n * in, rng());
      std::vector<BlockQ8_1> xq(n * nb);
      QuantizeActivationsQ8_1(x.data(), n, in, xq.data());
      const WeightView w{t, data.data(), out, in};
      const bool is_packed = PackSmallQuantInt8(t, xq.data(), n, nb, &packed);
      const int64_t i0 = rng() % n, m = 1 + rng() % (n - i0);
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      std::vector<float> want(m * out, -1.0f), got(m * out, -1.0f);
      GemvSmallQuantInt8(w, xq.data() + i0 * nb, m, want.data(), out, r0, r1);
      GemvSmallQuantInt8Packed(w, xq.data(), is_packed ? &packed : nullptr, i0, m, got.data(), out,
                               r0, r1);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
  CHECK_FALSE(PackSmallQuantInt8(WeightType::kQ8_0, nullptr, 0, 0, &packed));
}

TEST_CASE("GemvSmallQuantInt8: a row's bits do not depend on the call's rows or row range") {
  // At the VNNI levels Q4_0 runs in column lanes (<= 4 activation rows in registers, more from a
  // repacked panel): each row must get the same bits either way, in any panel position.
  std::mt19937 rng(67);
  for (WeightType t :
       {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kIQ4_NL, WeightType::kMXFP4}) {
    INFO(WeightTypeName(t));
    const int64_t in = 32 * 23, out = 45, nb = in / 32, rows = 10;
    const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
    const WeightView w{t, data.data(), out, in};
    const std::vector<float> x = testing::Random(rows * in, rng());
    std::vector<BlockQ8_1> xq(rows * nb);
    QuantizeActivationsQ8_1(x.data(), rows, in, xq.data());
    std::vector<float> all(rows * out);
    GemvSmallQuantInt8(w, xq.data(), rows, all.data(), out, 0, out);
    CHECK(testing::RowsDifferingFromOneCall(
              all, rows, out, {1, 3, 4}, rng,
              [&](int64_t i0, int64_t n, float* y, int64_t r0, int64_t r1) {
                GemvSmallQuantInt8(w, xq.data() + i0 * nb, n, y, out, r0, r1);
              }) == 0);
  }
}

}  // namespace quant_dot_small_test
}  // namespace textgen::ops
