// Q2_K / Q3_K / Q5_K / IQ4_XS int8 kernels (fast mode) against the dequantized weights times the
// F32 activations, within the error the Q8_K activation quantization allows: each activation
// moves by at most half a quantization step (amax / 127 / 2 of its block), so
// |y - exact| <= sum_k |w_k| * step(k) / 2, plus F32 rounding.
#include "engine/ops/kquant_dot_more.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "engine/ops/kquant_dot.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace {

TEST_CASE("GemvKQuantInt8More against dequantize-then-F32, row ranges, SIMD = portable",
          "[quant]") {
  std::mt19937 rng(45);
  for (WeightType t :
       {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ5_K, WeightType::kIQ4_XS}) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 5; ++trial) {
      const int64_t in = 256 * (1 + rng() % 6), out = 1 + rng() % 45, n = 1 + rng() % 8;
      INFO("in " << in << " out " << out << " n " << n);
      const std::vector<uint8_t> data = testing::RandomQuantRows(t, out, in, rng());
      const std::vector<float> wf = testing::Dequantize(t, data, out * in);
      std::vector<float> x = testing::Random(n * in, rng());
      for (int64_t k = 0; k < 256; ++k) x[k] *= 1e-3f;  // a block of small activations
      if (n > 1) {
        for (int64_t k = in; k < in + 256; ++k) x[k] = 0.0f;  // an all-zero block
      }
      std::vector<BlockQ8_K> xq(n * in / 256);
      QuantizeActivationsQ8_K(x.data(), n, in, xq.data());
      const WeightView w{t, data.data(), out, in};
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      testing::ExpectRowRange([&](float* y, int64_t ldy, int64_t a,
                                  int64_t b) { GemvKQuantInt8More(w, xq.data(), n, y, ldy, a, b); },
                              n, out + 2, r0, r1, 1.0,
                              [&](int64_t i, int64_t r) {
                                testing::Expected e;
                                double bound = 0;
                                for (int64_t k = 0; k < in; ++k) {
                                  const double p =
                                      static_cast<double>(x[i * in + k]) * wf[r * in + k];
                                  e.value += p;
                                  const double step = std::fabs(xq[(i * in + k) / 256].d);
                                  bound += std::fabs(wf[r * in + k]) * step * 0.5;
                                  e.mag += std::fabs(p);
                                }
                                // Expressed on the scale ExpectRowRange uses (rel_tol 1.0 * mag).
                                e.mag = bound * 1.001 + 1e-5 * e.mag;
                                return e;
                              });
      std::vector<float> ya(n * out), yb(n * out);
      GemvKQuantInt8More(w, xq.data(), n, ya.data(), out, 0, out);
      portable::GemvKQuantInt8More(w, xq.data(), n, yb.data(), out, 0, out);
      // The same exact int32 sums per super-block; the AVX-512 Q5_K tiles add them in another
      // F32 order (per lane, mins apart), so the bound is on the sum of the magnitudes, as for
      // the Q4_K / Q6_K tiles in kquant_dot_test.cc.
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < out; ++r) {
          double mag = 0;
          for (int64_t k = 0; k < in; ++k) mag += std::fabs(x[i * in + k] * wf[r * in + k]);
          INFO("i " << i << " r " << r);
          CHECK(std::fabs(ya[i * out + r] - yb[i * out + r]) <= 1e-5 * mag + 1e-6);
        }
      }
    }
  }
}

}  // namespace
}  // namespace textgen::ops
