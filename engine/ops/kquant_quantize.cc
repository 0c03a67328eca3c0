// Q8_K activation quantization (kquant_dot.h's QuantizeActivationsQ8_K): 16 lanes at the
// 512-bit K-quant levels, 8 at the avx2/avx512 levels, the portable loop below that, all
// bit-identical to ggml's quantize_row_q8_K.
#include <cmath>
#include <cstring>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

#if defined(TG_KQUANT_512)
// ---- Q8_K activation quantization, 16 lanes -------------------------------------------------

void QuantizeBlockQ8_K(const float* v, BlockQ8_K* out) {
  __m512 x[16];
  __m512 amax = _mm512_setzero_ps();
  TG_UNROLL
  for (int k = 0; k < 16; ++k) {
    x[k] = _mm512_loadu_ps(v + 16 * k);
    // max(|x|, amax) returns amax for a NaN x: NaNs are skipped, as the scalar `a > amax`.
    amax = _mm512_max_ps(_mm512_abs_ps(x[k]), amax);
  }
  const float m = _mm512_reduce_max_ps(amax);
  if (m == 0.0f) {
    std::memset(out, 0, sizeof(*out));
    return;
  }
  // The first value of largest magnitude (the scalar loop keeps the first on ties).
  float max = 0.0f;
  const __m512 mv = _mm512_set1_ps(m);
  for (int k = 0; k < 16; ++k) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(x[k]), mv, _CMP_EQ_OQ);
    if (hit != 0) {
      max = v[16 * k + __builtin_ctz(hit)];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m512 is = _mm512_set1_ps(iscale);
  __m512 r[16];
  TG_UNROLL
  for (int k = 0; k < 16; ++k) {
    // nearbyint (round to nearest even) of the same F32 product, then min(q, 127).
    r[k] = _mm512_min_ps(_mm512_roundscale_ps(_mm512_mul_ps(x[k], is),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                         _mm512_set1_ps(127.0f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs + 16 * k),
                     _mm512_cvtsepi32_epi8(_mm512_cvttps_epi32(r[k])));
  }
  // bsums: sums of 16 integers of magnitude <= 127, exact in F32 in any order.
  __m128 s[4];
  TG_UNROLL
  for (int g = 0; g < 4; ++g) s[g] = simd::Reduce4(r + 4 * g);
  const __m512 sums = _mm512_insertf32x4(
      _mm512_insertf32x4(_mm512_insertf32x4(_mm512_castps128_ps512(s[0]), s[1], 1), s[2], 2), s[3],
      3);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->bsums),
                      _mm512_cvtsepi32_epi16(_mm512_cvttps_epi32(sums)));
  out->d = 1.0f / iscale;
}
#endif  // TG_KQUANT_512

#if !defined(TG_KQUANT_512) && defined(__AVX2__)
// ---- Q8_K activation quantization, 8 lanes (the avx2 and avx512 levels) -------------------
// Bit-identical to the portable loop, as the 16-lane version above.
void QuantizeBlockQ8_K8(const float* v, BlockQ8_K* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 32; ++k) {
    // max(|x|, amax) returns amax for a NaN x: NaNs are skipped, as the scalar `a > amax`.
    amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * k)), amax);
  }
  const float m = simd::ReduceMax(amax);
  if (m == 0.0f) {
    std::memset(out, 0, sizeof(*out));
    return;
  }
  // The first value of largest magnitude (the scalar loop keeps the first on ties).
  float max = 0.0f;
  const __m256 mv = _mm256_set1_ps(m);
  for (int k = 0; k < 32; ++k) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * k));
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, mv, _CMP_EQ_OQ));
    if (hit != 0) {
      max = v[8 * k + __builtin_ctz(hit)];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 is = _mm256_set1_ps(iscale), top = _mm256_set1_ps(127.0f);
  // Pack order of packs_epi32 / packs_epi16 within lanes, undone by one dword permute.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int g = 0; g < 8; ++g) {  // 32 values: 4 vectors
    __m256 r[4];
    for (int k = 0; k < 4; ++k) {
      // nearbyint (round to nearest even) of the same F32 product, then min(q, 127).
      r[k] = _mm256_min_ps(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(v + 32 * g + 8 * k), is),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                           top);
    }
    const __m256i q01 = _mm256_packs_epi32(_mm256_cvtps_epi32(r[0]), _mm256_cvtps_epi32(r[1]));
    const __m256i q23 = _mm256_packs_epi32(_mm256_cvtps_epi32(r[2]), _mm256_cvtps_epi32(r[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->qs + 32 * g),
                        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), order));
    // bsums: sums of 16 integers of magnitude <= 127, exact in F32 in any order.
    out->bsums[2 * g] = static_cast<int16_t>(simd::Reduce1(_mm256_add_ps(r[0], r[1])));
    out->bsums[2 * g + 1] = static_cast<int16_t>(simd::Reduce1(_mm256_add_ps(r[2], r[3])));
  }
  out->d = 1.0f / iscale;
}
#endif  // !TG_KQUANT_512 && __AVX2__

}  // namespace

namespace portable {
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
}  // namespace portable

void QuantizeActivationsQ8_K(const float* x, int64_t n, int64_t in, BlockQ8_K* xq) {
#if defined(TG_KQUANT_512)
  for (int64_t b = 0; b < n * (in / kQkK); ++b) QuantizeBlockQ8_K(x + b * kQkK, xq + b);
#elif defined(__AVX2__)
  for (int64_t b = 0; b < n * (in / kQkK); ++b) QuantizeBlockQ8_K8(x + b * kQkK, xq + b);
#else
  portable::QuantizeActivationsQ8_K(x, n, in, xq);
#endif
}

TG_ISA_END
}  // namespace textgen::ops
