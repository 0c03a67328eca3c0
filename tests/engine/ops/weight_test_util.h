// Shared by the tests of the weight kernels (q8_0_gemv, gemv_float, weight_convert).
#ifndef TEXTGEN_TESTS_ENGINE_OPS_WEIGHT_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_OPS_WEIGHT_TEST_UTIL_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <random>
#include <vector>

#include "engine/format/dtype.h"
#include "engine/ops/weight.h"

namespace textgen::ops::testing {

// `count` random Q8_0 blocks: scales in [-scale, scale] (F16), q uniform over -128..127, and
// the extremes mixed in: blocks of all -128, all 127, all-zero q, and d = 0.
inline std::vector<BlockQ8_0> RandomBlocks(int64_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::uniform_int_distribution<int> q(-128, 127);
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    BlockQ8_0& blk = blocks[b];
    blk.d = F32ToF16(d(rng));
    for (int8_t& v : blk.qs) v = static_cast<int8_t>(q(rng));
    if (b % 7 == 3) std::fill(std::begin(blk.qs), std::end(blk.qs), int8_t{-128});
    if (b % 11 == 5) std::fill(std::begin(blk.qs), std::end(blk.qs), int8_t{127});
    if (b % 13 == 6) std::fill(std::begin(blk.qs), std::end(blk.qs), int8_t{0});
    if (b % 17 == 8) blk.d = 0;
  }
  return blocks;
}

// A value y[i, r] must never take: what the kernels' untouched outputs keep.
inline constexpr float kSentinel = -12345.0f;

// One expected output: the exact value (double) and sum_k |x_k w_k|, the scale of the float
// rounding errors (so cancellation cannot fail a check).
struct Expected {
  double value = 0.0;
  double mag = 0.0;
};

// The signature every row-range kernel under test is wrapped into: y [n, ldy].
using RowRangeCall = std::function<void(float* y, int64_t ldy, int64_t r0, int64_t r1)>;

// Runs `call` on a y [n, ldy] filled with kSentinel and checks that each y[i, r] with r in
// [r0, r1) is within rel_tol * mag of want(i, r), and that nothing else was written.
inline void ExpectRowRange(const RowRangeCall& call, int64_t n, int64_t ldy, int64_t r0, int64_t r1,
                           double rel_tol,
                           const std::function<Expected(int64_t i, int64_t r)>& want) {
  std::vector<float> y(static_cast<size_t>(n * ldy), kSentinel);
  call(y.data(), ldy, r0, r1);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < ldy; ++r) {
      const float got = y[i * ldy + r];
      if (r < r0 || r >= r1) {
        if (got != kSentinel && bad++ < 3) {
          FAIL_CHECK("y[" << i << ", " << r << "] outside [" << r0 << ", " << r1
                          << ") was written: " << got);
        }
        continue;
      }
      const Expected e = want(i, r);
      const double err = std::fabs(got - e.value);
      if (!(err <= rel_tol * e.mag + 1e-30) && bad++ < 3) {
        FAIL_CHECK("y[" << i << ", " << r << "] = " << got << ", want " << e.value << " (error "
                        << err / (e.mag + 1e-30) << " of sum|x*w| " << e.mag << ")");
      }
    }
  }
  CHECK(bad == 0);
}

// y [n, out] of one call over all rows, for comparing runs bit for bit.
inline std::vector<float> RunAll(const RowRangeCall& call, int64_t n, int64_t out) {
  std::vector<float> y(static_cast<size_t>(n * out), kSentinel);
  call(y.data(), out, 0, out);
  return y;
}

// The same y [n, out] assembled from calls on the row ranges split at `cuts` (ascending).
inline std::vector<float> RunSplit(const RowRangeCall& call, int64_t n, int64_t out,
                                   const std::vector<int64_t>& cuts) {
  std::vector<float> y(static_cast<size_t>(n * out), kSentinel);
  int64_t r0 = 0;
  for (int64_t c : cuts) {
    call(y.data(), out, r0, c);
    r0 = c;
  }
  call(y.data(), out, r0, out);
  return y;
}

}  // namespace textgen::ops::testing

#endif  // TEXTGEN_TESTS_ENGINE_OPS_WEIGHT_TEST_UTIL_H_
