#include "engine/ops/kquant_dot.h"

#include <cmath>
#include <cstdlib>

#include "engine/ops/half.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
namespace {

// ---- portable dot products per super-block: the definition the SIMD versions follow ----

float DotQ4K(const BlockQ4_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0, summs = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    KScaleMin(j, w.scales, &sc, &mn);
    const uint8_t* q = w.qs + 32 * (j / 2);
    int32_t s = 0;
    for (int l = 0; l < 32; ++l) {
      const int v = j % 2 == 0 ? (q[l] & 0xF) : (q[l] >> 4);
      s += v * a.qs[32 * j + l];
    }
    sumi += sc * s;
    summs += mn * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotQ6K(const BlockQ6_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = w.ql + 64 * h;
    const uint8_t* qh = w.qh + 32 * h;
    const int8_t* sc = w.scales + 8 * h;
    const int8_t* x = a.qs + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      sumi += sc[is] * q1 * x[l] + sc[is + 2] * q2 * x[l + 32] + sc[is + 4] * q3 * x[l + 64] +
              sc[is + 6] * q4 * x[l + 96];
    }
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi);
}

#if defined(__AVX2__)
// Sum of u8 x s8 products in pairs (int16, no saturation: weights <= 63, |x| <= 128 gives
// at most 16128), times the int16 scales, added to int32 lanes: VNNI's dpwssd when present.
inline __m256i MulAdd(__m256i acc, __m256i wu8, __m256i xs8, __m256i scale16) {
  const __m256i p = _mm256_maddubs_epi16(wu8, xs8);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p, scale16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, scale16));
#endif
}

inline int32_t HSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

float DotQ4KSimd(const BlockQ4_K& w, const BlockQ8_K& a) {
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) KScaleMin(j, w.scales, &sc[j], &mn[j]);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i acc = _mm256_setzero_si256();
  for (int p = 0; p < 4; ++p) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * p));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * p));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * p + 32));
    acc = MulAdd(acc, _mm256_and_si256(q, m4), x0, _mm256_set1_epi16(sc[2 * p]));
    acc = MulAdd(acc, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), x1,
                 _mm256_set1_epi16(sc[2 * p + 1]));
  }
  // Mins: bsums pairs (16 int16) times the mins repeated per pair.
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const __m256i mins16 =
      _mm256_cvtepu8_epi16(_mm_set_epi8(mn[7], mn[7], mn[6], mn[6], mn[5], mn[5], mn[4], mn[4],
                                        mn[3], mn[3], mn[2], mn[2], mn[1], mn[1], mn[0], mn[0]));
  const int32_t summs = HSum(_mm256_madd_epi16(bs, mins16));
  return a.d * half::F16ToF32(w.d) * static_cast<float>(HSum(acc)) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotQ6KSimd(const BlockQ6_K& w, const BlockQ8_K& a) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  __m256i acc = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = w.ql + 64 * h;
    const int8_t* sc = w.scales + 8 * h;
    const int8_t* x = a.qs + 128 * h;
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qh + 32 * h));
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4))};
    for (int k = 0; k < 4; ++k) {
      // 32 values: the first 16 use scale sc[2k], the last 16 sc[2k + 1].
      const __m256i s16 =
          _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * k));
      acc = MulAdd(acc, q[k], xv, s16);
    }
  }
  // The -32 offset of every weight: 32 * sum_j sc[j] * bsums[j] (sub-blocks of 16).
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales)));
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const int32_t offset = 32 * HSum(_mm256_madd_epi16(sc16, bs));
  return a.d * half::F16ToF32(w.d) * static_cast<float>(HSum(acc) - offset);
}
#endif  // __AVX2__

template <typename Block, float (*Dot)(const Block&, const BlockQ8_K&)>
void Rows(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy, int64_t r0,
          int64_t r1) {
  const int64_t nb = w.in / kQkK;
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w.row(r));
    for (int64_t i = 0; i < n; ++i) {
      const BlockQ8_K* a = xq + i * nb;
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) sum += Dot(row[b], a[b]);
      y[i * ldy + r] = sum;
    }
  }
}

}  // namespace

void QuantizeActivationsQ8_K(const float* x, int64_t n, int64_t in, BlockQ8_K* xq) {
  const int64_t nb = in / kQkK;
  for (int64_t i = 0; i < n * nb; ++i) {
    const float* v = x + i * kQkK;
    BlockQ8_K& out = xq[i];
    float max = 0.0f, amax = 0.0f;
    for (int k = 0; k < kQkK; ++k) {
      const float a = std::fabs(v[k]);
      if (a > amax) {
        amax = a;
        max = v[k];
      }
    }
    if (amax == 0.0f) {
      out.d = 0.0f;
      for (int8_t& q : out.qs) q = 0;
      for (int16_t& s : out.bsums) s = 0;
      continue;
    }
    const float iscale = -127.0f / max;
    for (int k = 0; k < kQkK; ++k) {
      const int q = static_cast<int>(std::nearbyint(iscale * v[k]));
      out.qs[k] = static_cast<int8_t>(q < 127 ? q : 127);
    }
    for (int j = 0; j < kQkK / 16; ++j) {
      int s = 0;
      for (int k = 0; k < 16; ++k) s += out.qs[16 * j + k];
      out.bsums[j] = static_cast<int16_t>(s);
    }
    out.d = 1.0f / iscale;
  }
}

namespace portable {
void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  if (w.type == WeightType::kQ4_K) return Rows<BlockQ4_K, DotQ4K>(w, xq, n, y, ldy, r0, r1);
  if (w.type == WeightType::kQ6_K) return Rows<BlockQ6_K, DotQ6K>(w, xq, n, y, ldy, r0, r1);
}
}  // namespace portable

void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
#if defined(__AVX2__)
  if (w.type == WeightType::kQ4_K) return Rows<BlockQ4_K, DotQ4KSimd>(w, xq, n, y, ldy, r0, r1);
  if (w.type == WeightType::kQ6_K) return Rows<BlockQ6_K, DotQ6KSimd>(w, xq, n, y, ldy, r0, r1);
#else
  portable::GemvKQuantInt8(w, xq, n, y, ldy, r0, r1);
#endif
}

}  // namespace textgen::ops
