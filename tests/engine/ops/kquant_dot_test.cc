// Q4_K / Q5_K / Q6_K / IQ4_XS int8 kernels (fast mode) against the dequantized weights times the
// F32 activations, within the error the Q8_K activation quantization allows: each activation moves
// by at most half a quantization step (amax / 127 / 2 of its block), so
// |y - exact| <= sum_k |w_k| * step(k) / 2, plus F32 rounding.
#include "engine/ops/kquant_dot.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/ops/kquant_dot_more.h"
#include "tests/engine/ops/kquant_check.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace kquant_dot_test {

TEST_CASE("QuantizeActivationsQ8_K: the largest magnitude maps to -127, bsums", "[quant]") {
  std::vector<float> x = testing::Random(512, 3);
  x[7] = 2.5f;  // block 0's largest
  for (int k = 256; k < 512; ++k) x[k] = 0.0f;
  std::vector<BlockQ8_K> q(2);
  QuantizeActivationsQ8_K(x.data(), 1, 512, q.data());
  CHECK(q[0].qs[7] == -127);
  CHECK(q[0].d == Approx(-2.5f / 127));
  int s = 0;
  for (int k = 16; k < 32; ++k) s += q[0].qs[k];
  CHECK(q[0].bsums[1] == s);
  CHECK(q[1].d == 0.0f);
  CHECK(q[1].qs[100] == 0);
}

TEST_CASE("QuantizeActivationsQ8_K is bit-identical to the portable reference", "[quant]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t n = 1 + rng() % 3, in = 256 * (1 + rng() % 4);
    std::vector<float> x = testing::Random(n * in, rng());
    if (trial == 1) {
      // Halves: with max 127 the scale is -1, so every odd k / 2 is a rounding tie.
      for (int64_t k = 0; k < n * in; ++k)
        x[k] = static_cast<float>(static_cast<int>(k % 255) - 127) * 0.5f;
      for (int64_t k = 3; k < n * in; k += 256) x[k] = 127.0f;
    }
    if (trial == 2) {
      for (int64_t k = 0; k < n * in; ++k)
        x[k] = (k % 7 == 0) ? 1.0f : ((k % 7 == 1) ? -1.0f : 0.25f);
      for (int k = 0; k < 256; ++k) x[k] = 0.0f;  // an all-zero block
    }
    std::vector<BlockQ8_K> a(n * in / 256), b(n * in / 256);
    QuantizeActivationsQ8_K(x.data(), n, in, a.data());
    portable::QuantizeActivationsQ8_K(x.data(), n, in, b.data());
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("trial " << trial << " block " << k);
      CHECK(std::memcmp(&a[k], &b[k], sizeof(BlockQ8_K)) == 0);
    }
  }
}

TEST_CASE("GemvKQuantInt8 against dequantize-then-F32, row ranges, SIMD = portable", "[quant]") {
  std::mt19937 rng(21);
  for (WeightType t :
       {WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K, WeightType::kIQ4_XS}) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 8; ++trial) {
      const int64_t in = 256 * (1 + rng() % 6), out = 1 + rng() % 45, n = 1 + rng() % 9;
      INFO("in " << in << " out " << out << " n " << n);
      testing::CheckKQuantInt8(t, in, out, n, rng, /*zero_block=*/false, GemvKQuantInt8,
                               portable::GemvKQuantInt8);
    }
  }
}

TEST_CASE("GemvKQuantInt8Prepared: one preparation per call gives every row range's bytes") {
  // Linear's path: the Q8_K activations prepared once per call (at the VNNI levels; elsewhere
  // nothing is prepared and the unprepared kernels run), then any chunk of activation rows and
  // weight row range, with stale bytes in the reused buffers from a larger earlier call.
  std::mt19937 rng(43);
  KQuantPrepared prepared;
  for (WeightType t : {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ4_K, WeightType::kQ5_K,
                       WeightType::kQ6_K, WeightType::kIQ4_XS}) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t in = 256 * (1 + rng() % 4), out = 1 + rng() % 45, n = 1 + rng() % 12;
      const int64_t nb = in / 256;
      INFO("in " << in << " out " << out << " n " << n);
      const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
      const std::vector<float> x = testing::Random(n * in, rng());
      std::vector<BlockQ8_K> xq(n * nb);
      QuantizeActivationsQ8_K(x.data(), n, in, xq.data());
      const WeightView w{t, data.data(), out, in};
      const bool is_prepared = PrepareKQuantInt8(t, xq.data(), n, nb, &prepared);
      const int64_t i0 = rng() % n, m = 1 + rng() % (n - i0);
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      std::vector<float> want(m * out, -1.0f), got(m * out, -1.0f);
      if (HasKQuantInt8(t)) {
        GemvKQuantInt8(w, xq.data() + i0 * nb, m, want.data(), out, r0, r1);
      } else {
        GemvKQuantInt8More(w, xq.data() + i0 * nb, m, want.data(), out, r0, r1);
      }
      GemvKQuantInt8Prepared(w, xq.data(), is_prepared ? &prepared : nullptr, i0, m, got.data(),
                             out, r0, r1);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
  CHECK_FALSE(PrepareKQuantInt8(WeightType::kQ8_0, nullptr, 0, 0, &prepared));
}

TEST_CASE("GemvKQuantInt8: a row's bits do not depend on the call's rows or row range") {
  // At the VNNI levels Q4_K runs in column lanes: calls of <= 4 activation rows transpose each
  // panel in registers, larger ones repack it; both must give each row the same bits, whatever
  // panel (row range start, ragged end) the weight row lands in. Elsewhere the row tiles hold
  // the same property.
  std::mt19937 rng(61);
  for (WeightType t : {WeightType::kQ4_K, WeightType::kQ6_K}) {
    INFO(WeightTypeName(t));
    const int64_t in = 768, out = 53, nb = in / 256, rows = 11;
    const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
    const WeightView w{t, data.data(), out, in};
    const std::vector<float> x = testing::Random(rows * in, rng());
    std::vector<BlockQ8_K> xq(rows * nb);
    QuantizeActivationsQ8_K(x.data(), rows, in, xq.data());
    std::vector<float> all(rows * out);
    GemvKQuantInt8(w, xq.data(), rows, all.data(), out, 0, out);  // one panel path call
    CHECK(testing::RowsDifferingFromOneCall(
              all, rows, out, {1, 2, 4}, rng,
              [&](int64_t i0, int64_t n, float* y, int64_t r0, int64_t r1) {
                GemvKQuantInt8(w, xq.data() + i0 * nb, n, y, out, r0, r1);
              }) == 0);
  }
}

}  // namespace kquant_dot_test
}  // namespace textgen::ops
