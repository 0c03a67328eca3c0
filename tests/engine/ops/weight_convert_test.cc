#include "engine/ops/weight_convert.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/format/dtype.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace weight_convert_test {

using testing::RandomBlocks;

constexpr uint16_t kGuard16 = 0xABCD;
constexpr uint32_t kGuard32 = 0xDEADBEEF;

// A source matrix stored as `type` with the F32 values dtype.h's ToF32 reads from it.
struct Source {
  WeightType type;
  DType dtype;
  int64_t out, in;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [out, in]
};

Source MakeSource(WeightType type, int64_t out, int64_t in, uint32_t seed) {
  Source s{type, DType::kF32, out, in, {}, std::vector<float>(out * in)};
  std::mt19937 rng(seed);
  switch (type) {
    case WeightType::kF32: {
      // Random bit patterns (every class: subnormals, inf, NaN payloads) plus BF16 rounding
      // cases: ties to even in both directions, the largest float (rounds to inf), and a
      // signalling NaN whose payload truncation would lose.
      std::vector<uint32_t> bits(out * in);
      for (uint32_t& b : bits) b = static_cast<uint32_t>(rng());
      const uint32_t edge[] = {0x3f808000, 0x3f818000, 0x3f80ffff, 0x7f7fffff, 0xff7fffff,
                               0x7f800001, 0xff800001, 0x00008000, 0x00018000, 0x80000001,
                               0x7f800000, 0x00000000, 0x80000000, 0x7fc00000};
      for (size_t k = 0; k < std::size(edge) && k < bits.size(); ++k) bits[k] = edge[k];
      s.bytes.resize(bits.size() * 4);
      std::memcpy(s.bytes.data(), bits.data(), s.bytes.size());
      s.dtype = DType::kF32;
      break;
    }
    case WeightType::kF16:
    case WeightType::kBf16: {
      // Every 16-bit pattern in turn, so all classes of both formats are covered.
      s.bytes.resize(out * in * 2);
      const uint16_t start = static_cast<uint16_t>(rng());
      for (int64_t k = 0; k < out * in; ++k) {
        const uint16_t h = static_cast<uint16_t>(start + k);
        std::memcpy(s.bytes.data() + 2 * k, &h, 2);
      }
      s.dtype = type == WeightType::kF16 ? DType::kF16 : DType::kBf16;
      break;
    }
    case WeightType::kQ8_0: {
      const std::vector<BlockQ8_0> blocks = RandomBlocks(out * in / 32, seed, 2.0f);
      s.bytes.resize(blocks.size() * sizeof(BlockQ8_0));
      std::memcpy(s.bytes.data(), blocks.data(), s.bytes.size());
      s.dtype = DType::kQ8_0;
      break;
    }
    default:
      // The block formats have their own tests (quant_gemv_test.cc).
      FAIL("MakeSource has no generator for this weight type");
  }
  ToF32(s.dtype, s.bytes.data(), s.values.data(), out * in);
  return s;
}

// F32 results equal bit for bit, except that a NaN need only stay a NaN of the same sign
// (VCVTPH2PS quiets signalling NaNs).
bool SameF32(float got, float want) {
  if (std::isnan(want)) return std::isnan(got) && std::signbit(got) == std::signbit(want);
  return std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
}

using ToF32Fn = void (*)(const WeightView&, int64_t, int64_t, float*);
using ToBf16Fn = void (*)(const WeightView&, int64_t, int64_t, uint16_t*);

void CheckConvert(ToF32Fn to_f32, ToBf16Fn to_bf16) {
  struct Case {
    WeightType type;
    int64_t out, in;
  };
  // 65536 values for the 16-bit types (every pattern once); odd lengths for partial vectors.
  const Case cases[] = {{WeightType::kF16, 1024, 64}, {WeightType::kBf16, 1024, 64},
                        {WeightType::kF16, 7, 21},    {WeightType::kBf16, 5, 3},
                        {WeightType::kF32, 300, 37},  {WeightType::kF32, 3, 1},
                        {WeightType::kQ8_0, 19, 96},  {WeightType::kQ8_0, 2, 32}};
  for (const Case& c : cases) {
    const Source s = MakeSource(c.type, c.out, c.in, static_cast<uint32_t>(c.out * 31 + c.in));
    const WeightView view{c.type, s.bytes.data(), c.out, c.in};
    std::vector<std::pair<int64_t, int64_t>> ranges = {{0, c.out}, {c.out / 2, c.out}};
    if (c.out >= 3) ranges.push_back({1, c.out - 1});
    for (auto [r0, r1] : ranges) {
      INFO(std::string(WeightTypeName(c.type))
           << " [" << c.out << ", " << c.in << "] rows [" << r0 << ", " << r1 << ")");
      const int64_t count = (r1 - r0) * c.in;
      // One guard element past the end must survive.
      std::vector<float> f(count + 1, std::bit_cast<float>(kGuard32));
      std::vector<uint16_t> b(count + 1, kGuard16);
      to_f32(view, r0, r1, f.data());
      to_bf16(view, r0, r1, b.data());
      CHECK(std::bit_cast<uint32_t>(f[count]) == kGuard32);
      CHECK(b[count] == kGuard16);
      int64_t bad = 0;
      for (int64_t k = 0; k < count; ++k) {
        const float want = s.values[r0 * c.in + k];
        // BF16 of the exact value; a BF16 source is copied as is.
        uint16_t want_b = F32ToBF16(want);
        if (c.type == WeightType::kBf16)
          std::memcpy(&want_b, s.bytes.data() + 2 * (r0 * c.in + k), 2);
        if ((!SameF32(f[k], want) || b[k] != want_b) && bad++ < 3) {
          FAIL_CHECK("element " << k << ": f32 " << std::hex << std::bit_cast<uint32_t>(f[k])
                                << " want " << std::bit_cast<uint32_t>(want) << ", bf16 " << b[k]
                                << " want " << want_b);
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("ConvertRowsF32/ConvertRowsBf16 agree with dtype.h's scalar converters") {
  CheckConvert(&ConvertRowsF32, &ConvertRowsBf16);
}

TEST_CASE("portable ConvertRowsF32/ConvertRowsBf16 agree with dtype.h's scalar converters") {
  CheckConvert(&portable::ConvertRowsF32, &portable::ConvertRowsBf16);
}

TEST_CASE("ConvertRowsBf16 keeps subnormals and rounds ties to even") {
  const float in[] = {std::bit_cast<float>(0x00018000u), std::bit_cast<float>(0x3f808000u),
                      std::bit_cast<float>(0x3f818000u), std::bit_cast<float>(0x7f7fffffu)};
  const uint16_t want[] = {0x0002, 0x3f80, 0x3f82, 0x7f80};
  const WeightView view{WeightType::kF32, in, 1, 4};
  uint16_t out[4];
  ConvertRowsBf16(view, 0, 1, out);
  for (int k = 0; k < 4; ++k) CHECK(out[k] == want[k]);
}

}  // namespace weight_convert_test
}  // namespace textgen::ops
