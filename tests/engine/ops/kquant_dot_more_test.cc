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
#include "tests/engine/ops/kquant_check.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace kquant_dot_more_test {

TEST_CASE("GemvKQuantInt8More against dequantize-then-F32, row ranges, SIMD = portable",
          "[quant]") {
  std::mt19937 rng(45);
  for (WeightType t :
       {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ5_K, WeightType::kIQ4_XS}) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 5; ++trial) {
      const int64_t in = 256 * (1 + rng() % 6), out = 1 + rng() % 45, n = 1 + rng() % 8;
      INFO("in " << in << " out " << out << " n " << n);
      // The AVX-512 Q5_K tiles add the int32 sums in another F32 order (per lane, mins apart),
      // within the same bound as the Q4_K / Q6_K tiles.
      testing::CheckKQuantInt8(t, in, out, n, rng, /*zero_block=*/true, GemvKQuantInt8More,
                               portable::GemvKQuantInt8More);
    }
  }
}

}  // namespace kquant_dot_more_test
}  // namespace textgen::ops
