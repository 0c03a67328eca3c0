// Scalar F16/BF16 <-> F32 conversions for the op kernels (internal to engine/ops; the room may
// not depend on engine/format, whose dtype.h has the same semantics). Used for Q8_0 scales, the
// kernels' tails and the portable (non-AVX-512) paths.
#ifndef TEXTGEN_ENGINE_OPS_HALF_H_
#define TEXTGEN_ENGINE_OPS_HALF_H_

#include <bit>
#include <cstdint>
#include <cstring>

#include "engine/ops/isa_namespace.h"

#if defined(__F16C__)
// Same GCC 12 false positives as in engine/ops/simd.h, which explains them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace textgen::ops::half {
TG_ISA_BEGIN

// Exact (subnormals, inf and NaN included).
inline float F16ToF32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in F32.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
#endif
}

// Round to nearest even; overflow gives inf, NaN stays NaN.
inline uint16_t F32ToF16(float f) {
#if defined(__F16C__)
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00 | static_cast<uint16_t>((a >> 13) & 0x3ff);
  if (a >= 0x477ff000u) return sign | 0x7c00;  // rounds to inf (65520 ties to even = inf)
  if (a >= 0x38800000u) {
    // Normal half: rebias 127 -> 15, round the 13 dropped bits to nearest even (a carry out
    // of the mantissa correctly bumps the exponent).
    a += (static_cast<uint32_t>(15 - 127) << 23) + 0xfff + ((a >> 13) & 1);
    return sign | static_cast<uint16_t>(a >> 13);
  }
  // Subnormal half (m * 2^-24); below 2^-25 everything rounds to zero.
  const int e = static_cast<int>(a >> 23);
  if (e < 102) return sign;
  const uint32_t m24 = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - e;  // 14..24
  uint32_t m = m24 >> shift;
  const uint32_t rem = m24 & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (m & 1))) ++m;
  return sign | static_cast<uint16_t>(m);
#endif
}

inline float Bf16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest even, subnormals kept (unlike VCVTNEPS2BF16, which flushes them to zero);
// NaN gets the quiet bit so truncation cannot turn it into inf.
inline uint16_t F32ToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// A 16-bit value at an address of any alignment (mapped files give 2 at best).
inline uint16_t LoadU16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

TG_ISA_END
}  // namespace textgen::ops::half

#endif  // TEXTGEN_ENGINE_OPS_HALF_H_
