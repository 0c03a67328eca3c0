#include "engine/ops/kquant_dot_more.h"

#include <cstring>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// Q3_K: the 16 6-bit scales (0..63, value sc - 32) from the 12 packed bytes (ggml's
// dequantize_row_q3_K: low 4 bits in bytes 0-7, high 2 bits in bytes 8-11).
inline void Q3KScales(const uint8_t* packed, int8_t sc[16]) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(sc, aux, 16);
}

// ---- portable dot products per super-block: the definition the SIMD versions follow ----
// Value index p = 128 h + 32 j + l (h half, j 2-bit plane, l < 32) for Q2_K / Q3_K.

float DotQ2K(const BlockQ2_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0, summs = 0;
  for (int sub = 0; sub < 16; ++sub) summs += (w.scales[sub] >> 4) * a.bsums[sub];
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * h + 2 * j + g;
        int32_t s = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          s += ((w.qs[32 * h + l] >> (2 * j)) & 3) * a.qs[128 * h + 32 * j + l];
        }
        sumi += (w.scales[sub] & 0xF) * s;
      }
    }
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotQ3K(const BlockQ3_K& w, const BlockQ8_K& a) {
  int8_t sc[16];
  Q3KScales(w.scales, sc);
  int32_t sumi = 0;
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * h + 2 * j + g;
        // value = u - 4 with u = q2 + 4 * (high bit): the -4 goes through bsums.
        int32_t s = -4 * a.bsums[sub];
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int u =
              ((w.qs[32 * h + l] >> (2 * j)) & 3) | (((w.hmask[l] >> (4 * h + j)) & 1) << 2);
          s += u * a.qs[128 * h + 32 * j + l];
        }
        sumi += (sc[sub] - 32) * s;
      }
    }
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi);
}

float DotQ5K(const BlockQ5_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0, summs = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    KScaleMin(j, w.scales, &sc, &mn);
    const uint8_t* q = w.qs + 32 * (j / 2);
    int32_t s = 0;
    for (int l = 0; l < 32; ++l) {
      const int v = (j % 2 == 0 ? (q[l] & 0xF) : (q[l] >> 4)) | (((w.qh[l] >> j) & 1) << 4);
      s += v * a.qs[32 * j + l];
    }
    sumi += sc * s;
    summs += mn * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotIQ4XS(const BlockIQ4_XS& w, const BlockQ8_K& a) {
  int32_t sumi = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* q = w.qs + 16 * ib;
    const int8_t* x = a.qs + 32 * ib;
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) {
      s += kIq4nlValues[q[l] & 0xF] * x[l] + kIq4nlValues[q[l] >> 4] * x[l + 16];
    }
    sumi += (IQ4XSScaleBits(w, ib) - 32) * s;
  }
  return half::F16ToF32(w.d) * a.d * static_cast<float>(sumi);
}

#if defined(__AVX2__)
inline int32_t HSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Scales for 32 values whose first 16 use `lo` and last 16 `hi` (maddubs pairs 0-7 / 8-15).
inline __m256i Scales2(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                          _mm_set1_epi16(static_cast<int16_t>(lo)));
}

float DotQ2KSimd(const BlockQ2_K& w, const BlockQ8_K& a) {
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256i acc = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i q = Load(w.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const int sub = 8 * h + 2 * j;
      const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
      acc = MulAddU8S8(acc, u, Load(a.qs + 128 * h + 32 * j),
                       Scales2(w.scales[sub] & 0xF, w.scales[sub + 1] & 0xF));
    }
  }
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
  const __m256i mins16 =
      _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
  const int32_t summs = HSum(_mm256_madd_epi16(Load(a.bsums), mins16));
  return a.d * half::F16ToF32(w.d) * static_cast<float>(HSum(acc)) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotQ3KSimd(const BlockQ3_K& w, const BlockQ8_K& a) {
  int8_t sc[16];
  Q3KScales(w.scales, sc);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  const __m256i hm = Load(w.hmask);
  __m256i acc = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i q = Load(w.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const int sub = 8 * h + 2 * j;
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
      const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3),
                                        _mm256_slli_epi16(hi, 2));
      acc = MulAddU8S8(acc, u, Load(a.qs + 128 * h + 32 * j),
                       Scales2(sc[sub] - 32, sc[sub + 1] - 32));
    }
  }
  // The -4 of every value: 4 * sum_sub (sc - 32) * bsums[sub].
  const __m256i sc16 =
      _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                       _mm256_set1_epi16(32));
  const int32_t offset = 4 * HSum(_mm256_madd_epi16(sc16, Load(a.bsums)));
  return a.d * half::F16ToF32(w.d) * static_cast<float>(HSum(acc) - offset);
}

#endif  // __AVX2__

}  // namespace

namespace portable {
void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
  switch (w.type) {
    case WeightType::kQ2_K:
      return KQuantRows<BlockQ2_K, DotQ2K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ3_K:
      return KQuantRows<BlockQ3_K, DotQ3K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ5_K:
      return KQuantRows<BlockQ5_K, DotQ5K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kIQ4_XS:
      return KQuantRows<BlockIQ4_XS, DotIQ4XS>(w, xq, n, y, ldy, r0, r1);
    default:
      return;
  }
}
}  // namespace portable

void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
#if defined(__AVX2__)
  switch (w.type) {
    case WeightType::kQ5_K:
    case WeightType::kIQ4_XS:
      // The tiles of GemvKQuantInt8 (engine/ops/kquant_dot.cc at the VNNI levels,
      // engine/ops/kquant_tiles_avx2.cc below them; Q5_K as Q4_K with the fifth bit).
      return GemvKQuantInt8(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ2_K:
      return KQuantRows<BlockQ2_K, DotQ2KSimd>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ3_K:
      return KQuantRows<BlockQ3_K, DotQ3KSimd>(w, xq, n, y, ldy, r0, r1);
    default:
      return;
  }
#else
  portable::GemvKQuantInt8More(w, xq, n, y, ldy, r0, r1);
#endif
}

TG_ISA_END
}  // namespace textgen::ops
