// One check of a Q8_K int8 kernel (fast mode) shared by the K-quant kernel tests: against the
// dequantized weights times the F32 activations within the error the Q8_K activation
// quantization allows (each activation moves by at most half a step of its block), on a random
// row range, and the SIMD kernel against the portable one within a few ulps of the sum of the
// magnitudes (the same exact int32 sums added in another F32 order).
#ifndef TEXTGEN_TESTS_ENGINE_OPS_KQUANT_CHECK_H_
#define TEXTGEN_TESTS_ENGINE_OPS_KQUANT_CHECK_H_

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/ops/kquant_dot.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops::testing {

// `simd` and `portable`: (const WeightView&, const BlockQ8_K*, n, y, ldy, row0, row1). The first
// block of activations is small; with `zero_block` (and n > 1) the second row's first block is 0.
template <typename Kernel, typename Portable>
void CheckKQuantInt8(WeightType t, int64_t in, int64_t out, int64_t n, std::mt19937& rng,
                     bool zero_block, Kernel simd, Portable portable) {
  const std::vector<uint8_t> data = RandomQuantRows(t, out, in, rng());
  const std::vector<float> wf = Dequantize(t, data, out * in);
  std::vector<float> x = Random(n * in, rng());
  for (int64_t k = 0; k < 256; ++k) x[k] *= 1e-3f;  // a block of small activations
  if (zero_block && n > 1) {
    for (int64_t k = in; k < in + 256; ++k) x[k] = 0.0f;  // an all-zero block
  }
  std::vector<BlockQ8_K> xq(n * in / 256);
  QuantizeActivationsQ8_K(x.data(), n, in, xq.data());
  const WeightView w{t, data.data(), out, in};
  const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
  ExpectRowRange(
      [&](float* y, int64_t ldy, int64_t a, int64_t b) { simd(w, xq.data(), n, y, ldy, a, b); }, n,
      out + 2, r0, r1, 1.0,
      [&](int64_t i, int64_t r) {
        Expected e;
        double bound = 0;
        for (int64_t k = 0; k < in; ++k) {
          const double p = static_cast<double>(x[i * in + k]) * wf[r * in + k];
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
  simd(w, xq.data(), n, ya.data(), out, 0, out);
  portable(w, xq.data(), n, yb.data(), out, 0, out);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < out; ++r) {
      double mag = 0;
      for (int64_t k = 0; k < in; ++k) mag += std::fabs(x[i * in + k] * wf[r * in + k]);
      INFO("i " << i << " r " << r);
      CHECK(std::fabs(ya[i * out + r] - yb[i * out + r]) <= 1e-5 * mag + 1e-6);
    }
  }
}

}  // namespace textgen::ops::testing

#endif  // TEXTGEN_TESTS_ENGINE_OPS_KQUANT_CHECK_H_
