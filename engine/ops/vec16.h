// Vec16: 16 F32 lanes written once, computed alike at every instruction-set level
// (internal to engine/ops).
//
// Issue #32: the choice of kernel level changes speed, never answers. The F32 kernels that
// reduce (sums of squares, softmax sums, dot products, maxima) are written once on Vec16, so
// every level adds in the same lanes and the same tree:
//   Vec16<Native>   one __m512 at the AVX-512 levels, two __m256 (lanes 0-7, 8-15) at avx2,
//                   else the portable form;
//   Vec16<Portable> float[16] in plain C++: the reference every level's bytes are tested
//                   against (the kernels' portable:: entry points run on it).
// Vec16d is the 16 double lanes companion (exact squares, sums of exponentials).
//
// Every operation is one IEEE operation per lane (a fused multiply-add rounds once, also in
// the portable form: std::fma), so a kernel gives the same bytes on either type provided the
// compiler does not fuse a multiply and an add of its own: the files using these types are
// compiled with -ffp-contract=off (engine/CMakeLists.txt). Max/Min follow vmaxps/vminps:
// Max(a, b) = a > b ? a : b, so when either is NaN (or both are zeros) the result is b.
// Which NaN comes out where several meet (sign, payload) is left open, as IEEE 754 leaves it:
// x86 returns the first NaN operand, and an FMA's operand order is the compiler's choice; a
// NaN result is NaN in every form. Reductions use one fixed tree: lanes i and i + 8 are added (or
// maxed), then i and i + 4, i and i + 2, i and i + 1.
#ifndef TEXTGEN_ENGINE_OPS_VEC16_H_
#define TEXTGEN_ENGINE_OPS_VEC16_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/isa_namespace.h"

#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12 flags its own AVX-512 headers (`__m256d __Y = __Y;` in _mm256_undefined_pd) with
// -W(maybe-)uninitialized wherever a reduction or extract intrinsic is inlined; a known false
// positive. Middle-end warnings honour the pragma state at the header's own lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The x86-64-v3 paths (AVX2, FMA, F16C): 8 lanes, and no mask registers, so tails use
// _mm256_maskload_ps with a lane mask or go through a zero-padded buffer.
#define TG_SIMD_AVX2 1
#endif

namespace textgen::ops::simd {
TG_ISA_BEGIN

#if defined(__AVX512F__)
// Lanes [0, n) set, n in [0, 16].
inline __mmask16 TailMask(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFF : ((1u << n) - 1u));
}
#endif

#if defined(TG_SIMD_AVX2)
// Lanes [0, n) all ones, n in [0, 8]: the mask operand of _mm256_maskload_ps/maskstore_ps.
inline __m256i TailMask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n < 8 ? n : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

struct Portable {};  // float[16] in plain C++, the same at every level
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
struct Native {};  // the level's registers
#else
using Native = Portable;  // no vector unit: the native form is the portable one
#endif

template <typename Isa>
struct Vec16;
template <typename Isa>
struct Vec16d;

// ---- Portable form ---------------------------------------------------------------------------

template <>
struct Vec16<Portable> {
  float v[16];

  static Vec16 Set1(float x) {
    Vec16 r;
    for (float& e : r.v) e = x;
    return r;
  }
  static Vec16 Zero() { return Set1(0.0f); }
  static Vec16 Load(const float* p) {
    Vec16 r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  // Lanes [0, n) from p, the others `fill`; n in [0, 16], nothing past p + n is read.
  static Vec16 LoadTail(const float* p, int64_t n, float fill = 0.0f) {
    Vec16 r;
    for (int64_t i = 0; i < 16; ++i) r.v[i] = i < n ? p[i] : fill;
    return r;
  }
  void Store(float* p) const { std::memcpy(p, v, sizeof(v)); }
  // Lanes [0, n) to p, n in [0, 16]; nothing past p + n is written.
  void StoreTail(float* p, int64_t n) const {
    for (int64_t i = 0; i < n && i < 16; ++i) p[i] = v[i];
  }
};

#define TG_VEC16_LANEWISE(name, expr)                                 \
  inline Vec16<Portable> name(Vec16<Portable> a, Vec16<Portable> b) { \
    Vec16<Portable> r;                                                \
    for (int i = 0; i < 16; ++i) r.v[i] = (expr);                     \
    return r;                                                         \
  }
TG_VEC16_LANEWISE(Add, a.v[i] + b.v[i])
TG_VEC16_LANEWISE(Sub, a.v[i] - b.v[i])
TG_VEC16_LANEWISE(Mul, a.v[i] * b.v[i])
TG_VEC16_LANEWISE(Div, a.v[i] / b.v[i])
TG_VEC16_LANEWISE(Max, a.v[i] > b.v[i] ? a.v[i] : b.v[i])
TG_VEC16_LANEWISE(Min, a.v[i] < b.v[i] ? a.v[i] : b.v[i])
#undef TG_VEC16_LANEWISE

// a * b + c, rounded once.
inline Vec16<Portable> Fma(Vec16<Portable> a, Vec16<Portable> b, Vec16<Portable> c) {
  Vec16<Portable> r;
  for (int i = 0; i < 16; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return r;
}
// c - a * b, rounded once.
inline Vec16<Portable> Fnma(Vec16<Portable> a, Vec16<Portable> b, Vec16<Portable> c) {
  Vec16<Portable> r;
  for (int i = 0; i < 16; ++i) r.v[i] = std::fma(-a.v[i], b.v[i], c.v[i]);
  return r;
}
// To the nearest integer, ties to even (the default rounding mode).
inline Vec16<Portable> Round(Vec16<Portable> a) {
  Vec16<Portable> r;
  for (int i = 0; i < 16; ++i) r.v[i] = std::nearbyint(a.v[i]);
  return r;
}
// p * 2^k rounded once, for p in [0.5, 2) and integral k in [-150, 128] (Exp's range): as two
// exact powers of two 2^k1 * 2^k2 with k1 = floor(k / 2), both normal floats, so p * 2^k1 is
// exact and only the second product rounds (subnormal results and overflow to inf included),
// which is what vscalefps computes at the AVX-512 levels.
inline Vec16<Portable> MulPow2(Vec16<Portable> p, Vec16<Portable> k) {
  Vec16<Portable> r;
  for (int i = 0; i < 16; ++i) {
    const int32_t ki = static_cast<int32_t>(k.v[i]);
    const int32_t k1 = ki >> 1, k2 = ki - k1;
    const uint32_t b1 = static_cast<uint32_t>(k1 + 127) << 23;
    const uint32_t b2 = static_cast<uint32_t>(k2 + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &b1, 4);
    std::memcpy(&s2, &b2, 4);
    r.v[i] = (p.v[i] * s1) * s2;
  }
  return r;
}
inline float ReduceAdd(Vec16<Portable> a) {
  for (int s = 8; s >= 1; s /= 2) {
    for (int i = 0; i < s; ++i) a.v[i] = a.v[i] + a.v[i + s];
  }
  return a.v[0];
}
inline float ReduceMax(Vec16<Portable> a) {
  for (int s = 8; s >= 1; s /= 2) {
    for (int i = 0; i < s; ++i) a.v[i] = a.v[i] > a.v[i + s] ? a.v[i] : a.v[i + s];
  }
  return a.v[0];
}

template <>
struct Vec16d<Portable> {
  double v[16];

  static Vec16d Zero() {
    Vec16d r;
    for (double& e : r.v) e = 0.0;
    return r;
  }
  // The 16 lanes of a, widened (exactly).
  static Vec16d Widen(Vec16<Portable> a) {
    Vec16d r;
    for (int i = 0; i < 16; ++i) r.v[i] = a.v[i];
    return r;
  }
};
inline Vec16d<Portable> Add(Vec16d<Portable> a, Vec16d<Portable> b) {
  for (int i = 0; i < 16; ++i) a.v[i] = a.v[i] + b.v[i];
  return a;
}
inline Vec16d<Portable> Fma(Vec16d<Portable> a, Vec16d<Portable> b, Vec16d<Portable> c) {
  for (int i = 0; i < 16; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return c;
}
inline double ReduceAdd(Vec16d<Portable> a) {
  for (int s = 8; s >= 1; s /= 2) {
    for (int i = 0; i < s; ++i) a.v[i] = a.v[i] + a.v[i + s];
  }
  return a.v[0];
}

// ---- AVX-512: one __m512 / two __m512d -------------------------------------------------------

#if defined(__AVX512F__)
#define TG_VEC16_NATIVE 1

template <>
struct Vec16<Native> {
  __m512 v;

  static Vec16 Set1(float x) { return {_mm512_set1_ps(x)}; }
  static Vec16 Zero() { return {_mm512_setzero_ps()}; }
  static Vec16 Load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec16 LoadTail(const float* p, int64_t n, float fill = 0.0f) {
    return {_mm512_mask_loadu_ps(_mm512_set1_ps(fill), TailMask(n), p)};
  }
  void Store(float* p) const { _mm512_storeu_ps(p, v); }
  void StoreTail(float* p, int64_t n) const { _mm512_mask_storeu_ps(p, TailMask(n), v); }
};

inline Vec16<Native> Add(Vec16<Native> a, Vec16<Native> b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec16<Native> Sub(Vec16<Native> a, Vec16<Native> b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec16<Native> Mul(Vec16<Native> a, Vec16<Native> b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec16<Native> Div(Vec16<Native> a, Vec16<Native> b) { return {_mm512_div_ps(a.v, b.v)}; }
inline Vec16<Native> Max(Vec16<Native> a, Vec16<Native> b) { return {_mm512_max_ps(a.v, b.v)}; }
inline Vec16<Native> Min(Vec16<Native> a, Vec16<Native> b) { return {_mm512_min_ps(a.v, b.v)}; }
inline Vec16<Native> Fma(Vec16<Native> a, Vec16<Native> b, Vec16<Native> c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}
inline Vec16<Native> Fnma(Vec16<Native> a, Vec16<Native> b, Vec16<Native> c) {
  return {_mm512_fnmadd_ps(a.v, b.v, c.v)};
}
inline Vec16<Native> Round(Vec16<Native> a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline Vec16<Native> MulPow2(Vec16<Native> p, Vec16<Native> k) {
  return {_mm512_scalef_ps(p.v, k.v)};
}
// The tree's first step on 256-bit halves, then the AVX2 form's steps.
inline __m256 Upper256(__m512 a) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}
inline float ReduceAdd8(__m256 t);
inline float ReduceMax8(__m256 t);
inline float ReduceAdd(Vec16<Native> a) {
  return ReduceAdd8(_mm256_add_ps(_mm512_castps512_ps256(a.v), Upper256(a.v)));
}
inline float ReduceMax(Vec16<Native> a) {
  return ReduceMax8(_mm256_max_ps(_mm512_castps512_ps256(a.v), Upper256(a.v)));
}

template <>
struct Vec16d<Native> {
  __m512d lo, hi;  // lanes 0-7, 8-15

  static Vec16d Zero() { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static Vec16d Widen(Vec16<Native> a) {
    return {_mm512_cvtps_pd(_mm512_castps512_ps256(a.v)), _mm512_cvtps_pd(Upper256(a.v))};
  }
};
inline Vec16d<Native> Add(Vec16d<Native> a, Vec16d<Native> b) {
  return {_mm512_add_pd(a.lo, b.lo), _mm512_add_pd(a.hi, b.hi)};
}
inline Vec16d<Native> Fma(Vec16d<Native> a, Vec16d<Native> b, Vec16d<Native> c) {
  return {_mm512_fmadd_pd(a.lo, b.lo, c.lo), _mm512_fmadd_pd(a.hi, b.hi, c.hi)};
}
inline double ReduceAdd4d(__m256d t);
inline double ReduceAdd(Vec16d<Native> a) {
  const __m512d t = _mm512_add_pd(a.lo, a.hi);
  return ReduceAdd4d(_mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1)));
}

// ---- AVX2: two __m256 / four __m256d ---------------------------------------------------------

#elif defined(TG_SIMD_AVX2)
#define TG_VEC16_NATIVE 1

template <>
struct Vec16<Native> {
  __m256 lo, hi;  // lanes 0-7, 8-15

  static Vec16 Set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static Vec16 Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Vec16 Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static Vec16 LoadTail(const float* p, int64_t n, float fill = 0.0f) {
    const __m256 f = _mm256_set1_ps(fill);
    const __m256i m0 = TailMask8(n), m1 = TailMask8(n - 8 < 0 ? 0 : n - 8);
    return {_mm256_blendv_ps(f, _mm256_maskload_ps(p, m0), _mm256_castsi256_ps(m0)),
            _mm256_blendv_ps(f, _mm256_maskload_ps(p + 8, m1), _mm256_castsi256_ps(m1))};
  }
  void Store(float* p) const {
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
  }
  void StoreTail(float* p, int64_t n) const {
    _mm256_maskstore_ps(p, TailMask8(n), lo);
    _mm256_maskstore_ps(p + 8, TailMask8(n - 8 < 0 ? 0 : n - 8), hi);
  }
};

#define TG_VEC16_AVX2_OP(name, intrinsic)                       \
  inline Vec16<Native> name(Vec16<Native> a, Vec16<Native> b) { \
    return {intrinsic(a.lo, b.lo), intrinsic(a.hi, b.hi)};      \
  }
TG_VEC16_AVX2_OP(Add, _mm256_add_ps)
TG_VEC16_AVX2_OP(Sub, _mm256_sub_ps)
TG_VEC16_AVX2_OP(Mul, _mm256_mul_ps)
TG_VEC16_AVX2_OP(Div, _mm256_div_ps)
TG_VEC16_AVX2_OP(Max, _mm256_max_ps)
TG_VEC16_AVX2_OP(Min, _mm256_min_ps)
#undef TG_VEC16_AVX2_OP
inline Vec16<Native> Fma(Vec16<Native> a, Vec16<Native> b, Vec16<Native> c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline Vec16<Native> Fnma(Vec16<Native> a, Vec16<Native> b, Vec16<Native> c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline Vec16<Native> Round(Vec16<Native> a) {
  constexpr int kMode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {_mm256_round_ps(a.lo, kMode), _mm256_round_ps(a.hi, kMode)};
}
// As the portable form: two exact powers of two built from k's bits.
inline __m256 MulPow2Half(__m256 p, __m256 k) {
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1);
  const __m256i k2 = _mm256_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
inline Vec16<Native> MulPow2(Vec16<Native> p, Vec16<Native> k) {
  return {MulPow2Half(p.lo, k.lo), MulPow2Half(p.hi, k.hi)};
}
inline float ReduceAdd8(__m256 t);
inline float ReduceMax8(__m256 t);
inline float ReduceAdd(Vec16<Native> a) { return ReduceAdd8(_mm256_add_ps(a.lo, a.hi)); }
inline float ReduceMax(Vec16<Native> a) { return ReduceMax8(_mm256_max_ps(a.lo, a.hi)); }

template <>
struct Vec16d<Native> {
  __m256d v[4];  // lanes 0-3, 4-7, 8-11, 12-15

  static Vec16d Zero() {
    return {{_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}};
  }
  static Vec16d Widen(Vec16<Native> a) {
    return {{_mm256_cvtps_pd(_mm256_castps256_ps128(a.lo)),
             _mm256_cvtps_pd(_mm256_extractf128_ps(a.lo, 1)),
             _mm256_cvtps_pd(_mm256_castps256_ps128(a.hi)),
             _mm256_cvtps_pd(_mm256_extractf128_ps(a.hi, 1))}};
  }
};
// Written out lane group by lane group: a loop over the array leaves the accumulators in
// memory at -O2 (a load and a store per add).
inline Vec16d<Native> Add(Vec16d<Native> a, Vec16d<Native> b) {
  return {{_mm256_add_pd(a.v[0], b.v[0]), _mm256_add_pd(a.v[1], b.v[1]),
           _mm256_add_pd(a.v[2], b.v[2]), _mm256_add_pd(a.v[3], b.v[3])}};
}
inline Vec16d<Native> Fma(Vec16d<Native> a, Vec16d<Native> b, Vec16d<Native> c) {
  return {{_mm256_fmadd_pd(a.v[0], b.v[0], c.v[0]), _mm256_fmadd_pd(a.v[1], b.v[1], c.v[1]),
           _mm256_fmadd_pd(a.v[2], b.v[2], c.v[2]), _mm256_fmadd_pd(a.v[3], b.v[3], c.v[3])}};
}
inline double ReduceAdd4d(__m256d t);
inline double ReduceAdd(Vec16d<Native> a) {
  return ReduceAdd4d(_mm256_add_pd(_mm256_add_pd(a.v[0], a.v[2]), _mm256_add_pd(a.v[1], a.v[3])));
}
#endif

#if defined(TG_VEC16_NATIVE)
// The tree's last three steps on 8 lanes: i + 4, i + 2, i + 1.
inline float ReduceAdd8(__m256 t) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float ReduceMax8(__m256 t) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The last two steps on 4 double lanes: i + 2, i + 1.
inline double ReduceAdd4d(__m256d t) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}
#endif

TG_ISA_END
}  // namespace textgen::ops::simd

#endif  // TEXTGEN_ENGINE_OPS_VEC16_H_
