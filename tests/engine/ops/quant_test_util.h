// Random weights in every ggml block format, for the tests of the quantized kernels.
#ifndef TEXTGEN_TESTS_ENGINE_OPS_QUANT_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_OPS_QUANT_TEST_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/format/dequantize.h"
#include "engine/format/dtype.h"
#include "engine/format/quant_blocks.h"
#include "engine/ops/weight.h"

namespace textgen::ops::testing {

// The block formats beyond Q8_0, in WeightType order.
inline constexpr WeightType kQuantTypes[] = {
    WeightType::kQ4_0, WeightType::kQ4_1,   WeightType::kQ5_0,   WeightType::kQ5_1,
    WeightType::kQ2_K, WeightType::kQ3_K,   WeightType::kQ4_K,   WeightType::kQ5_K,
    WeightType::kQ6_K, WeightType::kIQ4_NL, WeightType::kIQ4_XS, WeightType::kMXFP4};

// Byte offsets of the F16 scale fields of one block of `t` (everything else is bits, any
// value valid).
inline std::vector<size_t> F16Fields(WeightType t) {
  switch (t) {
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kIQ4_NL:
      return {0};
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
      return {0, 2};
    case WeightType::kQ2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case WeightType::kQ3_K:
      return {offsetof(BlockQ3_K, d)};
    case WeightType::kQ6_K:
      return {offsetof(BlockQ6_K, d)};
    case WeightType::kIQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    default:
      return {};
  }
}

// `rows` rows of `in` values of `t`: random bits, F16 scales uniform in [-scale, scale]
// (exact zero in every 13th block). MXFP4's E8M0 byte: a power of two such that the largest
// code (6) is 0.75x to 6x `scale`, and the smallest scale (e = 0, 2^-127) in every 13th block.
inline std::vector<uint8_t> RandomQuantRows(WeightType t, int64_t rows, int64_t in, uint32_t seed,
                                            float scale = 0.05f) {
  std::mt19937 rng(seed);
  const int64_t blocks = rows * in / WeightBlockSize(t);
  const size_t bb = WeightBlockBytes(t);
  std::vector<uint8_t> data(static_cast<size_t>(blocks) * bb);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> d(-scale, scale);
  for (int64_t b = 0; b < blocks; ++b) {
    for (size_t off : F16Fields(t)) {
      const uint16_t h = b % 13 == 5 ? 0 : F32ToF16(d(rng));
      std::memcpy(data.data() + b * bb + off, &h, 2);
    }
    if (t == WeightType::kMXFP4) {
      const int top = 127 + static_cast<int>(std::floor(std::log2(scale))) - 2;
      data[b * bb] = b % 13 == 5 ? 0 : static_cast<uint8_t>(top - 2 + static_cast<int>(rng() % 4));
    }
  }
  return data;
}

// The reference: engine/format's dequantizer (checked bit for bit against llama.cpp).
inline std::vector<float> Dequantize(WeightType t, const std::vector<uint8_t>& data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ToF32(t, data.data(), out.data(), n);
  return out;
}

// For calls of each count in `counts` activation rows, from every third row, over a random
// weight row range: the number of rows whose outputs differ in any bit from `all` [rows, out]
// (one call over every row). kernel(i0, n, y, r0, r1) fills y [n, out] for weight rows
// [r0, r1) from activation rows [i0, i0 + n).
template <typename Kernel>
int64_t RowsDifferingFromOneCall(const std::vector<float>& all, int64_t rows, int64_t out,
                                 const std::vector<int64_t>& counts, std::mt19937& rng,
                                 Kernel&& kernel) {
  int64_t bad = 0;
  for (int64_t n : counts) {
    for (int64_t i0 = 0; i0 + n <= rows; i0 += 3) {
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      std::vector<float> y(n * out, -1.0f);
      kernel(i0, n, y.data(), r0, r1);
      for (int64_t i = 0; i < n; ++i) {
        bad += std::memcmp(y.data() + i * out + r0, all.data() + (i0 + i) * out + r0,
                           (r1 - r0) * sizeof(float)) != 0;
      }
    }
  }
  return bad;
}

}  // namespace textgen::ops::testing

#endif  // TEXTGEN_TESTS_ENGINE_OPS_QUANT_TEST_UTIL_H_
