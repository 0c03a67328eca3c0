#include "engine/format/dtype.h"

#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/format/dequantize.h"
#include "engine/format/quant_blocks.h"

namespace textgen {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF and safetensors data are little-endian; big-endian hosts are unsupported");

// Names of the ggml type ids, so an unsupported type can be reported as "Q4_K" rather than
// just a number. Empty entries are ids ggml has retired or never used.
constexpr std::string_view kGgmlTypeNames[] = {
    "F32",     "F16",    "Q4_0",    "Q4_1",  "",       "",      "Q5_0",  "Q5_1",
    "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
    "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "",
    "",        "",       "TQ1_0",   "TQ2_0", "",       "",      "",      "MXFP4"};

std::string_view GgmlTypeName(uint32_t id) {
  if (id < std::size(kGgmlTypeNames)) return kGgmlTypeNames[id];
  return "";
}

// One row per DType, in enum order: ggml id, name, values and bytes per block.
struct TypeInfo {
  DType type;
  uint32_t ggml;
  std::string_view name;
  int64_t block;
  size_t block_bytes;
};
constexpr TypeInfo kTypes[] = {
    {DType::kF32, kGgmlTypeF32, "F32", 1, 4},
    {DType::kF16, kGgmlTypeF16, "F16", 1, 2},
    {DType::kBf16, kGgmlTypeBF16, "BF16", 1, 2},
    {DType::kQ8_0, kGgmlTypeQ8_0, "Q8_0", kQkSmall, sizeof(BlockQ8_0Format)},
    {DType::kQ4_0, kGgmlTypeQ4_0, "Q4_0", kQkSmall, sizeof(BlockQ4_0)},
    {DType::kQ4_1, kGgmlTypeQ4_1, "Q4_1", kQkSmall, sizeof(BlockQ4_1)},
    {DType::kQ5_0, kGgmlTypeQ5_0, "Q5_0", kQkSmall, sizeof(BlockQ5_0)},
    {DType::kQ5_1, kGgmlTypeQ5_1, "Q5_1", kQkSmall, sizeof(BlockQ5_1)},
    {DType::kQ2_K, kGgmlTypeQ2_K, "Q2_K", kQkK, sizeof(BlockQ2_K)},
    {DType::kQ3_K, kGgmlTypeQ3_K, "Q3_K", kQkK, sizeof(BlockQ3_K)},
    {DType::kQ4_K, kGgmlTypeQ4_K, "Q4_K", kQkK, sizeof(BlockQ4_K)},
    {DType::kQ5_K, kGgmlTypeQ5_K, "Q5_K", kQkK, sizeof(BlockQ5_K)},
    {DType::kQ6_K, kGgmlTypeQ6_K, "Q6_K", kQkK, sizeof(BlockQ6_K)},
    {DType::kIQ4_NL, kGgmlTypeIQ4_NL, "IQ4_NL", kQkSmall, sizeof(BlockIQ4_NL)},
    {DType::kIQ4_XS, kGgmlTypeIQ4_XS, "IQ4_XS", kQkK, sizeof(BlockIQ4_XS)},
    {DType::kMXFP4, kGgmlTypeMXFP4, "MXFP4", kQkSmall, sizeof(BlockMXFP4)},
};
static_assert(std::size(kTypes) == kNumDTypes);
static_assert([] {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (static_cast<int>(kTypes[i].type) != i) return false;
  }
  return true;
}());

const TypeInfo& Info(DType type) { return kTypes[static_cast<int>(type)]; }

}  // namespace

int64_t BlockSize(DType type) { return Info(type).block; }
size_t BlockBytes(DType type) { return Info(type).block_bytes; }

absl::StatusOr<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (const TypeInfo& t : kTypes) {
    if (t.ggml == ggml_type) return t.type;
  }
  std::string_view name = GgmlTypeName(ggml_type);
  if (!name.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "unsupported ggml tensor type ", ggml_type, " (", std::string(name),
        "); supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, "
        "Q6_K, IQ4_NL, IQ4_XS, MXFP4"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ggml tensor type id ", ggml_type));
}

uint32_t GgmlTypeOf(DType type) { return Info(type).ggml; }

std::string_view DTypeName(DType type) { return Info(type).name; }

absl::StatusOr<size_t> RowBytes(DType type, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("negative row length ", n));
  const uint64_t un = static_cast<uint64_t>(n);
  uint64_t bytes = 0;
  const int64_t block = BlockSize(type);
  if (n % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(DTypeName(type)), " row length ", n,
                                                   " is not a multiple of ", block));
  }
  const bool overflow =
      __builtin_mul_overflow(un / static_cast<uint64_t>(block), uint64_t{BlockBytes(type)}, &bytes);
  if (overflow || bytes > std::numeric_limits<size_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("row of ", n, " elements overflows size_t"));
  }
  return static_cast<size_t>(bytes);
}

void ToF32(DType type, const void* src, float* dst, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = F16ToF32(h);
      }
      return;
    case DType::kBf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = BF16ToF32(h);
      }
      return;
    case DType::kQ8_0:
      // Block layout [n / 32]: {uint16 f16 scale d, int8 q[32]}; value = d * q.
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const uint8_t* block = p + b * kQ8_0BlockBytes;
        uint16_t dh;
        std::memcpy(&dh, block, 2);
        const float d = F16ToF32(dh);
        const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
        float* out = dst + b * kQ8_0BlockSize;
        for (int64_t i = 0; i < kQ8_0BlockSize; ++i) out[i] = d * static_cast<float>(q[i]);
      }
      return;
    default:
      DequantizeRow(type, p, dst, n);
      return;
  }
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in F32 (2^-24 is a power of two).
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t F32ToF16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) {
    // NaN: keep the top payload bits and force the quiet bit so it cannot become inf.
    return sign | 0x7e00 | static_cast<uint16_t>((a >> 13) & 0x3ff);
  }
  // 65520 = 0x477ff000 is halfway between the largest half (65504) and 2^16; ties go to the
  // even neighbour, which is inf.
  if (a >= 0x477ff000u) return sign | 0x7c00;
  if (a >= 0x38800000u) {
    // Normal half. Rebias 127 -> 15 and round the 13 dropped bits to nearest even; a carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t odd = (a >> 13) & 1;
    a += (static_cast<uint32_t>(15 - 127) << 23) + 0xfff + odd;
    return sign | static_cast<uint16_t>(a >> 13);
  }
  // Subnormal half (value = m * 2^-24). Below 2^-25 everything rounds to zero.
  const int e = static_cast<int>(a >> 23);
  if (e < 102) return sign;
  const uint32_t m24 = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand
  const int shift = 126 - e;                         // 14..24
  uint32_t m = m24 >> shift;
  const uint32_t rem = m24 & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (m & 1))) ++m;  // may carry into the smallest normal
  return sign | static_cast<uint16_t>(m);
}

float BF16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t F32ToBF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncation could clear every payload bit and give inf, so force the quiet bit.
    return static_cast<uint16_t>((x >> 16) | 0x40);
  }
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even; overflow carries into inf
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace textgen
