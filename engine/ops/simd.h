// Small vector helpers shared by the op kernels (internal to engine/ops).
//
// The intrinsics helpers of the weight kernels (AVX-512 or AVX2 forms, per level), and the
// F32 helpers of the softmax, norm and attention kernels written once on Vec16 (vec16.h),
// which give the same bytes at every level and in their portable form (Isa = Portable).
#ifndef TEXTGEN_ENGINE_OPS_SIMD_H_
#define TEXTGEN_ENGINE_OPS_SIMD_H_

#include <cmath>
#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/vec16.h"

// GCC -O2 does not fully unroll short constant-count loops over arrays of vector registers,
// and then keeps the accumulators in memory (a load and a store per FMA). Kernels put this
// before such loops to force the unrolling.
#define TG_UNROLL _Pragma("GCC unroll 16")

namespace textgen::ops::simd {
TG_ISA_BEGIN

// The activation-row dispatch of the few-rows kernels: groups of 4 rows of x, then the 1-3
// left over, each as rows.template operator()<MR, NR>(i) for rows [i, i + MR) with NR weight
// rows per register tile. Fewer x rows take wider weight tiles (NR2, NR1) so that a tile still
// has enough independent accumulator chains to hide the FMA latency.
template <int NR2, int NR1, typename Rows>
inline void ForActivationRows(int64_t n, Rows&& rows) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) rows.template operator()<4, 4>(i);
  switch (n - i) {
    case 3:
      rows.template operator()<3, 4>(i);
      break;
    case 2:
      rows.template operator()<2, NR2>(i);
      break;
    case 1:
      rows.template operator()<1, NR1>(i);
      break;
    default:
      break;
  }
}

#if defined(__AVX512F__)
// The lane sums of a[0..3] as one __m128: {sum(a[0]), .., sum(a[3])}. Two in-lane shuffle
// rounds reduce the four vectors together, then the four 128-bit lanes are added; far fewer
// instructions than four _mm512_reduce_add_ps, which matters when a dot product is short.
inline __m128 Reduce4(const __m512* a) {
  // Per 128-bit lane: [a0_0+a0_2, a1_0+a1_2, a0_1+a0_3, a1_1+a1_3], same for a2/a3.
  const __m512 c = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
  const __m512 d = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
  // Per 128-bit lane: [a0, a1, a2, a3] partial sums of that lane.
  __m512 e = _mm512_add_ps(_mm512_shuffle_ps(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  e = _mm512_add_ps(e, _mm512_shuffle_f32x4(e, e, _MM_SHUFFLE(1, 0, 3, 2)));
  e = _mm512_add_ps(e, _mm512_shuffle_f32x4(e, e, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps128(e);
}

// The sum of a's lanes added in the same order as Reduce4 adds each of its vectors, so a dot
// product comes out bit for bit the same whether a 1-wide or a 4-wide tile computed it (and
// hence whatever row range a thread was given).
inline float Reduce1(__m512 a) {
  // Per 128-bit lane: (x0 + x2) + (x1 + x3), then (L0 + L2) + (L1 + L3) across lanes.
  __m512 t = _mm512_add_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
  t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(t);
}

// F32 -> BF16 bits for 16 values, as half::F32ToBf16: add 0x7fff plus the kept LSB, keep the
// upper half; NaNs instead keep their upper half with the quiet bit set. (VCVTNEPS2BF16 would
// flush subnormals to zero.)
inline __m256i RoundToBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// y[i * ldy + j] = the lane sum of acc[i][j], for NR = 1 or a multiple of 4.
template <int MR, int NR>
inline void StoreSums(const __m512 (&acc)[MR][NR], float* y, int64_t ldy) {
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR == 1) {
      y[i * ldy] = Reduce1(acc[i][0]);
    } else {
      TG_UNROLL
      for (int j = 0; j < NR; j += 4) _mm_storeu_ps(y + i * ldy + j, Reduce4(&acc[i][j]));
    }
  }
}
#endif

#if defined(__AVX2__)
// The sum and the max of 8 lanes (also used by 256-bit kernels at the AVX-512 levels).
inline float Reduce1(__m256 a) {
  __m256 t = _mm256_add_ps(a, _mm256_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
  t = _mm256_add_ps(t, _mm256_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

inline float ReduceMax(__m256 a) {
  __m128 t = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  t = _mm_max_ps(t, _mm_movehl_ps(t, t));
  t = _mm_max_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}
#endif

#if defined(TG_SIMD_AVX2)
// 8 BF16 values widened to F32: BF16 is the upper half of an F32, so zero-extend and shift.
inline __m256 WidenBf16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 LoadBf16(const uint16_t* p) {
  return WidenBf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 8 F16 values widened to F32 (F16C; exact, subnormals included).
inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// The first n in [0, 8] 16-bit values at p, zero-padded to 8 (nothing past p + n is read).
inline __m128i LoadU16Tail(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t buf[8] = {};
  for (int64_t i = 0; i < n; ++i) buf[i] = p[i];
  return _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
}

// 8 F32 -> BF16 bits as half::F32ToBf16: round to nearest even (add 0x7fff plus the kept LSB,
// keep the upper half); NaNs keep their upper half with the quiet bit set.
inline __m128i RoundToBf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i hi = _mm256_srli_epi32(bits, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
  const __m256i h =
      _mm256_blendv_epi8(rounded, quiet, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  // Lanes hold [0, 65535]; packus works per 128-bit lane, [h0-3 h0-3 | h4-7 h4-7].
  return _mm256_castsi256_si128(
      _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The lane sums of a[0..3] as one __m128, in the same order as Reduce1 adds each vector's
// lanes: ((x0 + x2) + (x1 + x3)) + ((x4 + x6) + (x5 + x7)). As with the AVX-512 pair, a dot
// product then comes out bit for bit the same from a 1-wide or a 4-wide tile.
inline __m128 Reduce4(const __m256* a) {
  const __m256 c = _mm256_add_ps(_mm256_unpacklo_ps(a[0], a[1]), _mm256_unpackhi_ps(a[0], a[1]));
  const __m256 d = _mm256_add_ps(_mm256_unpacklo_ps(a[2], a[3]), _mm256_unpackhi_ps(a[2], a[3]));
  const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));
}

inline double ReduceAdd(__m256d a) {
  __m128d t = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  t = _mm_add_sd(t, _mm_unpackhi_pd(t, t));
  return _mm_cvtsd_f64(t);
}

// The AVX2 counterpart of ForActivationRows, for 16 ymm registers instead of 32 zmm: 4 or 3
// rows of x take 2 weight rows per tile, 2 rows 4 and a single row 8, so that a tile's
// accumulators, its x vectors and a weight vector fit in registers.
template <typename Rows>
inline void ForActivationRows8(int64_t n, Rows&& rows) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) rows.template operator()<4, 2>(i);
  switch (n - i) {
    case 3:
      rows.template operator()<3, 2>(i);
      break;
    case 2:
      rows.template operator()<2, 4>(i);
      break;
    case 1:
      rows.template operator()<1, 8>(i);
      break;
    default:
      break;
  }
}

// y[i * ldy + j] = the lane sum of acc[i][j] for NR = 1, 2 or a multiple of 4; every width
// adds the lanes in Reduce1's order.
template <int MR, int NR>
inline void StoreSums(const __m256 (&acc)[MR][NR], float* y, int64_t ldy) {
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR == 1) {
      y[i * ldy] = Reduce1(acc[i][0]);
    } else if constexpr (NR == 2) {
      const __m256 a[4] = {acc[i][0], acc[i][1], _mm256_setzero_ps(), _mm256_setzero_ps()};
      _mm_storel_pi(reinterpret_cast<__m64*>(y + i * ldy), Reduce4(a));
    } else {
      for (int j = 0; j < NR; j += 4) _mm_storeu_ps(y + i * ldy + j, Reduce4(&acc[i][j]));
    }
  }
}

// Weight rows [r0, r1) in tiles of NR (then 4 when NR > 4, 2 when NR > 2, then 1):
// tile.template operator()<N>(r) computes rows [r, r + N).
template <int NR, typename Tile>
inline void ForRowTiles8(int64_t r0, int64_t r1, Tile&& tile) {
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) tile.template operator()<NR>(r);
  if constexpr (NR > 4) {
    for (; r + 4 <= r1; r += 4) tile.template operator()<4>(r);
  }
  if constexpr (NR > 2) {
    for (; r + 2 <= r1; r += 2) tile.template operator()<2>(r);
  }
  for (; r < r1; ++r) tile.template operator()<1>(r);
}

#endif

// ---- Kernels written once on Vec16 (vec16.h) ----------------------------------------------
// Isa = Native runs the level's registers, Isa = Portable the plain C++ lanes; both give the
// same bytes at every level (tests/engine/ops/*: "... gives the portable kernel's bytes at
// this level"), so the choice of level changes speed, never answers.

// exp(x) for 16 floats; ~1-2 ulp over the range where the result is a normal float. Inputs
// below -87.3 flush toward 0 (subnormal results rounded once) and above 88.7 go to inf, as
// expf does at the ends of its range; NaN lanes give exp(-104), which rounds to 0 (the
// clamp's Max passes its second operand). exp(x) = 2^k * exp(r), k = round(x / ln2), r = x - k*ln2
// split in two parts (Cody-Waite) so r stays exact; exp(r) on |r| <= ln2/2 by a degree-6 polynomial
// (Taylor coefficients with minimax tweaks from Cephes' expf); MulPow2 applies 2^k rounding
// once.
template <typename Isa>
inline Vec16<Isa> Exp(Vec16<Isa> x) {
  using V = Vec16<Isa>;
  x = Min(Max(x, V::Set1(-104.0f)), V::Set1(89.0f));
  const V k = Round(Mul(x, V::Set1(1.44269504088896341f)));
  V r = Fnma(k, V::Set1(0.693359375f), x);
  r = Fnma(k, V::Set1(-2.12194440e-4f), r);
  V p = V::Set1(1.9875691500e-4f);
  p = Fma(p, r, V::Set1(1.3981999507e-3f));
  p = Fma(p, r, V::Set1(8.3334519073e-3f));
  p = Fma(p, r, V::Set1(4.1665795894e-2f));
  p = Fma(p, r, V::Set1(1.6666665459e-1f));
  p = Fma(p, r, V::Set1(5.0000001201e-1f));
  p = Fma(p, Mul(r, r), Add(r, V::Set1(1.0f)));
  return MulPow2(p, k);
}

// sum_i a[i] * b[i] over n floats, float accumulation: 32 lanes (two Vec16 for elements
// [32j, 32j + 16) and [32j + 16, 32j + 32), the last chunk zero-padded), added lane by lane,
// then Vec16's tree.
template <typename Isa = Native>
inline float Dot(const float* a, const float* b, int64_t n) {
  using V = Vec16<Isa>;
  V acc0 = V::Zero(), acc1 = V::Zero();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = Fma(V::Load(a + i), V::Load(b + i), acc0);
    acc1 = Fma(V::Load(a + i + 16), V::Load(b + i + 16), acc1);
  }
  if (i < n) {
    const int64_t m0 = n - i, m1 = m0 > 16 ? m0 - 16 : 0;
    acc0 = Fma(V::LoadTail(a + i, m0), V::LoadTail(b + i, m0), acc0);
    if (m1 > 0) acc1 = Fma(V::LoadTail(a + i + 16, m1), V::LoadTail(b + i + 16, m1), acc1);
  }
  return ReduceAdd(Add(acc0, acc1));
}

// y[i] += alpha * x[i] over n floats, one FMA each.
template <typename Isa = Native>
inline void Axpy(float alpha, const float* x, float* y, int64_t n) {
  using V = Vec16<Isa>;
  const V va = V::Set1(alpha);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Fma(va, V::Load(x + i), V::Load(y + i)).Store(y + i);
  if (i < n) Fma(va, V::LoadTail(x + i, n - i), V::LoadTail(y + i, n - i)).StoreTail(y + i, n - i);
}

// max_i x[i] over n >= 1 floats, skipping NaNs (-inf if all are NaN): Max(a, b) returns b
// when either is NaN, so the running maximum is always passed second. 16 lanes, then the tree.
template <typename Isa = Native>
inline float Max(const float* x, int64_t n) {
  using V = Vec16<Isa>;
  V acc = V::Set1(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = Max(V::Load(x + i), acc);
  // Lanes past n hold -inf, which cannot win.
  if (i < n) acc = Max(V::LoadTail(x + i, n - i, -INFINITY), acc);
  return ReduceMax(acc);
}

// x[i] = exp(x[i] - shift) in place (float); returns the sum of the results accumulated in
// double (16 lanes, then the tree), so long rows (vocabularies of 10^5) lose no precision.
template <typename Isa = Native>
inline double ExpShiftSum(float* x, int64_t n, float shift) {
  using V = Vec16<Isa>;
  using D = Vec16d<Isa>;
  const V vs = V::Set1(shift);
  D acc = D::Zero();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const V e = Exp(Sub(V::Load(x + i), vs));
    e.Store(x + i);
    acc = Add(acc, D::Widen(e));
  }
  if (i < n) {
    // Lanes past n: exp(-inf - shift) = 0 (shift is finite or the row is NaN anyway).
    const V e = Exp(Sub(V::LoadTail(x + i, n - i, -INFINITY), vs));
    e.StoreTail(x + i, n - i);
    acc = Add(acc, D::Widen(e));
  }
  return ReduceAdd(acc);
}

// x[i] *= s over n floats: one multiply each, the same at every level. Written on Vec16 rather
// than left to the auto-vectorizer, which GCC's -O2 cost model declines for unknown trip
// counts (a vocabulary-sized softmax spent ~10 us in the scalar loop).
template <typename Isa = Native>
inline void Scale(float* x, int64_t n, float s) {
  using V = Vec16<Isa>;
  const V vs = V::Set1(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Mul(V::Load(x + i), vs).Store(x + i);
  if (i < n) Mul(V::LoadTail(x + i, n - i), vs).StoreTail(x + i, n - i);
}

TG_ISA_END
}  // namespace textgen::ops::simd

#endif  // TEXTGEN_ENGINE_OPS_SIMD_H_
