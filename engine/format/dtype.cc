#include "engine/format/dtype.h"

#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  switch (ggml_type) {
    case kGgmlTypeF32:
      return DType::kF32;
    case kGgmlTypeF16:
      return DType::kF16;
    case kGgmlTypeQ8_0:
      return DType::kQ8_0;
    case kGgmlTypeBF16:
      return DType::kBF16;
    default:
      break;
  }
  std::string_view name = GgmlTypeName(ggml_type);
  if (!name.empty()) {
    return absl::UnimplementedError(absl::StrCat("unsupported ggml tensor type ", ggml_type, " (",
                                                 std::string(name),
                                                 "); supported: F32, F16, BF16, Q8_0"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ggml tensor type id ", ggml_type));
}

uint32_t GgmlTypeOf(DType type) {
  switch (type) {
    case DType::kF32:
      return kGgmlTypeF32;
    case DType::kF16:
      return kGgmlTypeF16;
    case DType::kBF16:
      return kGgmlTypeBF16;
    case DType::kQ8_0:
      return kGgmlTypeQ8_0;
  }
  return kGgmlTypeF32;  // unreachable for valid enum values
}

std::string_view DTypeName(DType type) {
  switch (type) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQ8_0:
      return "Q8_0";
  }
  return "?";
}

absl::StatusOr<size_t> RowBytes(DType type, int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("negative row length ", n));
  const uint64_t un = static_cast<uint64_t>(n);
  uint64_t bytes = 0;
  bool overflow = false;
  switch (type) {
    case DType::kF32:
      overflow = __builtin_mul_overflow(un, uint64_t{4}, &bytes);
      break;
    case DType::kF16:
    case DType::kBF16:
      overflow = __builtin_mul_overflow(un, uint64_t{2}, &bytes);
      break;
    case DType::kQ8_0:
      if (n % kQ8_0BlockSize != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Q8_0 row length ", n, " is not a multiple of ", kQ8_0BlockSize));
      }
      overflow = __builtin_mul_overflow(un / kQ8_0BlockSize, uint64_t{kQ8_0BlockBytes}, &bytes);
      break;
  }
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
    case DType::kBF16:
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
