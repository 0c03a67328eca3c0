#include "engine/format/dtype.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace textgen {
namespace dtype_test {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

TEST_CASE("ggml type ids map to DTypes", "[dtype]") {
  CHECK(*DTypeFromGgmlType(0) == DType::kF32);
  CHECK(*DTypeFromGgmlType(1) == DType::kF16);
  CHECK(*DTypeFromGgmlType(8) == DType::kQ8_0);
  CHECK(*DTypeFromGgmlType(30) == DType::kBf16);
  for (DType t : {DType::kF32, DType::kF16, DType::kBf16, DType::kQ8_0}) {
    CHECK(*DTypeFromGgmlType(GgmlTypeOf(t)) == t);
  }
  auto iq2 = DTypeFromGgmlType(16);
  REQUIRE(!iq2.ok());
  CHECK(iq2.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(iq2.status().message()),
             Catch::Contains("16") && Catch::Contains("IQ2_XXS"));
  auto bogus = DTypeFromGgmlType(4000);
  REQUIRE(!bogus.ok());
  CHECK(bogus.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bogus.status().message()), Catch::Contains("4000"));
  CHECK(DTypeName(DType::kQ8_0) == "Q8_0");
  CHECK(DTypeName(DType::kBf16) == "BF16");
}

TEST_CASE("RowBytes", "[dtype]") {
  CHECK(*RowBytes(DType::kF32, 10) == 40);
  CHECK(*RowBytes(DType::kF16, 10) == 20);
  CHECK(*RowBytes(DType::kBf16, 3) == 6);
  CHECK(*RowBytes(DType::kQ8_0, 64) == 68);
  CHECK(*RowBytes(DType::kQ8_0, 0) == 0);
  CHECK(RowBytes(DType::kQ8_0, 33).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(RowBytes(DType::kF32, -1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(!RowBytes(DType::kF32, std::numeric_limits<int64_t>::max()).ok());
}

TEST_CASE("F16 to F32 known values", "[dtype]") {
  CHECK(F16ToF32(0x3c00) == 1.0f);
  CHECK(F16ToF32(0xc000) == -2.0f);
  CHECK(F16ToF32(0x3555) == 0x1.554p-2f);
  CHECK(F16ToF32(0x7bff) == 65504.0f);
  CHECK(F16ToF32(0x0400) == 0x1p-14f);  // smallest normal
  CHECK(F16ToF32(0x0001) == 0x1p-24f);  // smallest subnormal
  CHECK(F16ToF32(0x03ff) == 1023 * 0x1p-24f);
  CHECK(F16ToF32(0x8001) == -0x1p-24f);
  CHECK(Bits(F16ToF32(0x0000)) == 0u);
  CHECK(Bits(F16ToF32(0x8000)) == 0x80000000u);  // -0 keeps its sign
  CHECK(F16ToF32(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(F16ToF32(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(F16ToF32(0x7e00)));
  CHECK(std::isnan(F16ToF32(0x7c01)));  // signalling NaN stays NaN
}

TEST_CASE("F32 to F16 rounds to nearest even", "[dtype]") {
  CHECK(F32ToF16(1.0f) == 0x3c00);
  CHECK(F32ToF16(-2.0f) == 0xc000);
  CHECK(F32ToF16(65504.0f) == 0x7bff);
  CHECK(F32ToF16(65519.0f) == 0x7bff);  // below the halfway point
  CHECK(F32ToF16(65520.0f) == 0x7c00);  // tie goes to even, i.e. inf
  CHECK(F32ToF16(1e10f) == 0x7c00);
  CHECK(F32ToF16(-1e10f) == 0xfc00);
  CHECK(F32ToF16(1.0f + 0x1p-11f) == 0x3c00);      // tie -> even (down)
  CHECK(F32ToF16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // tie -> even (up)
  CHECK(F32ToF16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  CHECK(F32ToF16(0x1p-24f) == 0x0001);
  CHECK(F32ToF16(0x1p-25f) == 0x0000);  // tie -> even zero
  CHECK(F32ToF16(0x1p-25f * 1.0001f) == 0x0001);
  CHECK(F32ToF16(3 * 0x1p-25f) == 0x0002);         // 1.5 ulp tie -> 2
  CHECK(F32ToF16(0x1p-14f - 0x1p-26f) == 0x0400);  // rounds up into the normals
  CHECK(F32ToF16(1e-10f) == 0x0000);
  CHECK(F32ToF16(-1e-10f) == 0x8000);
  CHECK(F32ToF16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(F32ToF16(std::numeric_limits<float>::infinity()) == 0x7c00);
  const uint16_t nan = F32ToF16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(F16ToF32(F32ToF16(FromBits(0x7f800001)))));  // payload only in low bits
  CHECK(F32ToF16(FromBits(0xffc00000)) & 0x8000);
}

TEST_CASE("F16 round trips every value", "[dtype]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      REQUIRE(std::isnan(F16ToF32(F32ToF16(f))));
    } else {
      REQUIRE(F32ToF16(f) == h);
    }
  }
}

#ifdef __FLT16_MAX__
TEST_CASE("F32 to F16 matches the compiler's _Float16 conversion", "[dtype]") {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = any(rng);
    // Concentrate half of the samples around the F16 range, where rounding matters.
    if (i % 2 == 0) u = (u & 0x807fffffu) | ((100 + (u >> 23) % 48) << 23);
    const float f = FromBits(u);
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    INFO("f32 bits " << u);
    REQUIRE(F32ToF16(f) == ref_bits);
  }
}
#endif

TEST_CASE("BF16 conversions", "[dtype]") {
  CHECK(BF16ToF32(0x3f80) == 1.0f);
  CHECK(BF16ToF32(0xc040) == -3.0f);
  CHECK(BF16ToF32(0x0001) == FromBits(0x00010000));  // subnormal
  CHECK(BF16ToF32(0x7f80) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(BF16ToF32(0x7fc0)));
  CHECK(F32ToBF16(1.0f) == 0x3f80);
  CHECK(F32ToBF16(FromBits(0x3f808000)) == 0x3f80);  // tie -> even (down)
  CHECK(F32ToBF16(FromBits(0x3f818000)) == 0x3f82);  // tie -> even (up)
  CHECK(F32ToBF16(FromBits(0x3f808001)) == 0x3f81);
  CHECK(F32ToBF16(FromBits(0x00008000)) == 0x0000);  // subnormal tie -> even
  CHECK(F32ToBF16(FromBits(0x00018000)) == 0x0002);
  CHECK(F32ToBF16(std::numeric_limits<float>::max()) == 0x7f80);  // overflow -> inf
  CHECK(F32ToBF16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(std::isnan(BF16ToF32(F32ToBF16(FromBits(0x7f800001)))));  // NaN must not become inf
  CHECK(F32ToBF16(FromBits(0xff800001)) & 0x8000);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = BF16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    REQUIRE(F32ToBF16(f) == h);
  }
}

TEST_CASE("ToF32 converts every DType", "[dtype]") {
  const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.125f};
  std::vector<float> out(4);

  ToF32(DType::kF32, values.data(), out.data(), 4);
  CHECK(out == values);

  std::vector<uint16_t> h;
  for (float v : values) h.push_back(F32ToF16(v));
  ToF32(DType::kF16, h.data(), out.data(), 4);
  CHECK(out == values);

  std::vector<uint16_t> b;
  for (float v : values) b.push_back(F32ToBF16(v));
  ToF32(DType::kBf16, b.data(), out.data(), 4);
  CHECK(out == values);

  // Unaligned source: mapped tensors come at arbitrary offsets.
  std::vector<uint8_t> raw(1 + 4 * sizeof(float));
  std::memcpy(raw.data() + 1, values.data(), 4 * sizeof(float));
  ToF32(DType::kF32, raw.data() + 1, out.data(), 4);
  CHECK(out == values);
}

TEST_CASE("Q8_0 dequantization", "[dtype]") {
  // Two blocks of [fp16 d][32 x int8 q]: d = 0.5 with q = i - 16, then d = -0.25 with
  // q = {127, -128, 0, ...}.
  std::vector<uint8_t> raw(2 * kQ8_0BlockBytes, 0);
  const uint16_t d0 = 0x3800;  // 0.5
  const uint16_t d1 = 0xb400;  // -0.25
  std::memcpy(raw.data(), &d0, 2);
  for (int i = 0; i < 32; ++i) raw[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 16));
  std::memcpy(raw.data() + kQ8_0BlockBytes, &d1, 2);
  raw[kQ8_0BlockBytes + 2] = static_cast<uint8_t>(int8_t{127});
  raw[kQ8_0BlockBytes + 3] = static_cast<uint8_t>(int8_t{-128});

  std::vector<float> out(64, -1.0f);
  ToF32(DType::kQ8_0, raw.data(), out.data(), 64);
  for (int i = 0; i < 32; ++i) CHECK(out[i] == 0.5f * (i - 16));
  CHECK(out[0] == -8.0f);
  CHECK(out[31] == 7.5f);
  CHECK(out[32] == -31.75f);
  CHECK(out[33] == 32.0f);
  for (int i = 34; i < 64; ++i) CHECK(out[i] == 0.0f);
}

}  // namespace dtype_test
}  // namespace textgen
