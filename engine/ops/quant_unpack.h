// SIMD unpacking of ggml's block formats (Q4_0 ... IQ4_XS, engine/format/quant_blocks.h) for
// the exact kernels: internal to engine/ops (quant_decode.cc, quant_gemv.cc).
//
// Every format's value is  float(q) * A  (then + B or - B for the formats with a minimum),
// with q a small integer and A, B floats per group of 16 or 32 values: for example Q4_K is
// A = d * sc, B = dmin * mn, value = A * float(q) - B. A format here is a struct with
//   kValues, kBytes      values and bytes per block,
//   kChunks              kValues / 16,
//   kGroupShift          chunk c uses group c >> kGroupShift of A and B,
//   kOp                  kMul (A only), kMulAdd (+ B) or kMulSub (- B),
//   Scales(blk, a, b)    the block's A and B per group, scalar, as quant_decode.cc's scalar
//                        decoders compute them (same operations, same order),
//   Unpack<C>(blk)       q of values [16 C, 16 C + 16) as 16 int8 (SSE4.1 / SSSE3).
// Widening float(q) is exact and A * q, then +- B, round as the scalar code does, provided the
// including file is compiled without FMA contraction (-ffp-contract=off, see
// engine/CMakeLists.txt): the widened values equal the scalar decoders' bit for bit.
#ifndef TEXTGEN_ENGINE_OPS_QUANT_UNPACK_H_
#define TEXTGEN_ENGINE_OPS_QUANT_UNPACK_H_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "engine/format/quant_blocks.h"
#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"
#include "engine/ops/weight.h"

#if defined(__AVX2__)
#define TG_QUANT_UNPACK 1

namespace textgen::ops::unpack {
TG_ISA_BEGIN

enum class Op { kMul, kMulAdd, kMulSub };

// f(std::integral_constant<int, I>{}) for I in [0, N): chunk indices as constants, so every
// shift count and byte offset below is an immediate.
template <int N, typename F>
inline void Unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

inline float H(const uint8_t* p) { return half::F16ToF32(half::LoadU16(p)); }
inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
// The low (kHigh false) or high nibbles of 16 bytes.
template <bool kHigh>
inline __m128i Nibbles(const uint8_t* p) {
  const __m128i v = Load16(p);
  return _mm_and_si128(kHigh ? _mm_srli_epi16(v, 4) : v, _mm_set1_epi8(0x0F));
}
// 0x10 in byte j where bit j of the 16 bits `bits` is set, else 0.
inline __m128i BitsTo16(uint32_t bits) {
  const __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits)),
                                     _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i m = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b, m), m), _mm_set1_epi8(0x10));
}
inline __m128i Iq4Table() {
  __m128i t;
  std::memcpy(&t, kIq4nlValues, 16);
  return t;
}
inline __m128i Mxfp4Table() {
  __m128i t;
  std::memcpy(&t, kMxfp4Values, 16);
  return t;
}

// dst[0..7] = F32(int32 lanes of q) * d: the scalar decoders' d * float(sc), one rounding.
inline void ScaleTimes(__m256i q, float d, float* dst) {
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(q)));
}

// ---- 32-value blocks -----------------------------------------------------------------------

struct Q4_0 {
  static constexpr int kValues = 32, kBytes = sizeof(BlockQ4_0), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) { a[0] = H(blk); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return _mm_sub_epi8(Nibbles<C == 1>(blk + 2), _mm_set1_epi8(8));
  }
};

struct Q4_1 {
  static constexpr int kValues = 32, kBytes = sizeof(BlockQ4_1), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMulAdd;
  static void Scales(const uint8_t* blk, float* a, float* b) {
    a[0] = H(blk);
    b[0] = H(blk + 2);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return Nibbles<C == 1>(blk + 4);
  }
};

// Q5_0 / Q5_1: 4 low bits from qs, the 5th from the 32 bits qh (bit j = value j).
template <int kQh>
inline __m128i Q5Small(const uint8_t* blk, int c) {
  uint32_t qh;
  std::memcpy(&qh, blk + kQh, 4);
  const __m128i lo = c == 1 ? Nibbles<true>(blk + kQh + 4) : Nibbles<false>(blk + kQh + 4);
  return _mm_or_si128(lo, BitsTo16(c == 1 ? qh >> 16 : qh & 0xFFFF));
}

struct Q5_0 {
  static constexpr int kValues = 32, kBytes = sizeof(BlockQ5_0), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) { a[0] = H(blk); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return _mm_sub_epi8(Q5Small<2>(blk, C), _mm_set1_epi8(16));
  }
};

struct Q5_1 {
  static constexpr int kValues = 32, kBytes = sizeof(BlockQ5_1), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMulAdd;
  static void Scales(const uint8_t* blk, float* a, float* b) {
    a[0] = H(blk);
    b[0] = H(blk + 2);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return Q5Small<4>(blk, C);
  }
};

struct IQ4_NL {
  static constexpr int kValues = 32, kBytes = sizeof(BlockIQ4_NL), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) { a[0] = H(blk); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return _mm_shuffle_epi8(Iq4Table(), Nibbles<C == 1>(blk + 2));
  }
};

// A = half the E8M0 scale, q = the doubled E2M1 table's integer (quant_blocks.h).
struct MXFP4 {
  static constexpr int kValues = 32, kBytes = sizeof(BlockMXFP4), kChunks = 2, kGroupShift = 1;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) { a[0] = Mxfp4HalfScale(blk[0]); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return _mm_shuffle_epi8(Mxfp4Table(), Nibbles<C == 1>(blk + 1));
  }
};

// ---- 256-value super-blocks ----------------------------------------------------------------
//
// Q2_K, Q3_K: chunk c = 8 n + 2 s + h takes 2 bits at shift 2 s of qs[32 n + 16 h + l], and is
// scale group c (16 groups of 16).

struct Q2_K {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockQ2_K), kChunks = 16, kGroupShift = 0;
  static constexpr Op kOp = Op::kMulSub;
  static void Scales(const uint8_t* blk, float* a, float* b) {
    const float d = H(blk + offsetof(BlockQ2_K, d)), dmin = H(blk + offsetof(BlockQ2_K, dmin));
    const __m128i s = Load16(blk + offsetof(BlockQ2_K, scales));
    const __m128i lo = _mm_and_si128(s, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F));
    ScaleTimes(_mm256_cvtepu8_epi32(lo), d, a);
    ScaleTimes(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), d, a + 8);
    ScaleTimes(_mm256_cvtepu8_epi32(hi), dmin, b);
    ScaleTimes(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), dmin, b + 8);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    const __m128i v = Load16(blk + offsetof(BlockQ2_K, qs) + 32 * (C / 8) + 16 * (C % 2));
    return _mm_and_si128(_mm_srli_epi16(v, 2 * ((C / 2) % 4)), _mm_set1_epi8(3));
  }
};

struct Q3_K {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockQ3_K), kChunks = 16, kGroupShift = 0;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) {
    const float d_all = H(blk + offsetof(BlockQ3_K, d));
    // quant_decode.cc's Q3Scales on 32-bit words (llama.cpp's): scale j in byte j of u.
    uint32_t u[4];
    std::memcpy(u, blk + offsetof(BlockQ3_K, scales), 12);
    const uint32_t h = u[2], k3 = 0x03030303u, kf = 0x0F0F0F0Fu;
    u[2] = ((u[0] >> 4) & kf) | (((h >> 4) & k3) << 4);
    u[3] = ((u[1] >> 4) & kf) | (((h >> 6) & k3) << 4);
    u[0] = (u[0] & kf) | ((h & k3) << 4);
    u[1] = (u[1] & kf) | (((h >> 2) & k3) << 4);
    __m128i s;
    std::memcpy(&s, u, 16);
    const __m256i k32 = _mm256_set1_epi32(32);
    ScaleTimes(_mm256_sub_epi32(_mm256_cvtepu8_epi32(s), k32), d_all, a);
    ScaleTimes(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(s, 8)), k32), d_all, a + 8);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    constexpr int kN = C / 8, kS = (C / 2) % 4, kH = C % 2;
    const __m128i v = Load16(blk + offsetof(BlockQ3_K, qs) + 32 * kN + 16 * kH);
    const __m128i q = _mm_and_si128(_mm_srli_epi16(v, 2 * kS), _mm_set1_epi8(3));
    const __m128i hm = Load16(blk + offsetof(BlockQ3_K, hmask) + 16 * kH);
    const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << (4 * kN + kS)));
    // 4 where the high bit is clear.
    const __m128i clear = _mm_cmpeq_epi8(_mm_and_si128(hm, bit), _mm_setzero_si128());
    return _mm_sub_epi8(q, _mm_and_si128(clear, _mm_set1_epi8(4)));
  }
};

// Q4_K / Q5_K: sub-block s = c / 2 (8 groups of 32) takes the low (s even) or high nibbles of
// qs[32 (s / 2) + 16 h + l], h = c % 2; Q5_K's 5th bit is bit s of qh[16 h + l].
inline void KScalesMins(const uint8_t* blk, float* a, float* b) {
  const float d = H(blk), dmin = H(blk + 2);
  // KScaleMin for all 8 sub-blocks on 32-bit words (llama.cpp's): scales in bytes 0..7 of u,
  // mins in bytes 8..15.
  uint32_t u[4];
  std::memcpy(u, blk + 4, 12);
  const uint32_t k3f = 0x3F3F3F3Fu, kf = 0x0F0F0F0Fu, k3 = 0x03030303u;
  u[3] = ((u[2] >> 4) & kf) | (((u[1] >> 6) & k3) << 4);
  const uint32_t mins_lo = u[1] & k3f;
  u[1] = (u[2] & kf) | (((u[0] >> 6) & k3) << 4);
  u[2] = mins_lo;
  u[0] &= k3f;
  __m128i s;
  std::memcpy(&s, u, 16);
  ScaleTimes(_mm256_cvtepu8_epi32(s), d, a);
  ScaleTimes(_mm256_cvtepu8_epi32(_mm_srli_si128(s, 8)), dmin, b);
}

template <int C, int kQs>
inline __m128i KNibbles(const uint8_t* blk) {
  return Nibbles<(C / 2) % 2 == 1>(blk + kQs + 32 * (C / 4) + 16 * (C % 2));
}

struct Q4_K {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockQ4_K), kChunks = 16, kGroupShift = 1;
  static constexpr Op kOp = Op::kMulSub;
  static void Scales(const uint8_t* blk, float* a, float* b) { KScalesMins(blk, a, b); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return KNibbles<C, offsetof(BlockQ4_K, qs)>(blk);
  }
};

struct Q5_K {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockQ5_K), kChunks = 16, kGroupShift = 1;
  static constexpr Op kOp = Op::kMulSub;
  static void Scales(const uint8_t* blk, float* a, float* b) { KScalesMins(blk, a, b); }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    const __m128i qh = Load16(blk + offsetof(BlockQ5_K, qh) + 16 * (C % 2));
    const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << (C / 2)));
    const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(qh, bit), bit);
    return _mm_or_si128(KNibbles<C, offsetof(BlockQ5_K, qs)>(blk),
                        _mm_and_si128(set, _mm_set1_epi8(16)));
  }
};

// Q6_K: chunk c = 8 n + 2 t + h is scale group c; 4 low bits from ql[64 n + 32 (t % 2) + 16 h
// + l] (low nibble for t < 2), 2 high bits at shift 2 t of qh[32 n + 16 h + l]; q - 32.
struct Q6_K {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockQ6_K), kChunks = 16, kGroupShift = 0;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) {
    const float d = H(blk + offsetof(BlockQ6_K, d));
    const __m128i s = Load16(blk + offsetof(BlockQ6_K, scales));
    ScaleTimes(_mm256_cvtepi8_epi32(s), d, a);
    ScaleTimes(_mm256_cvtepi8_epi32(_mm_srli_si128(s, 8)), d, a + 8);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    constexpr int kN = C / 8, kT = (C / 2) % 4, kH = C % 2;
    const __m128i lo = Nibbles<(kT >= 2)>(blk + 64 * kN + 32 * (kT % 2) + 16 * kH);
    const __m128i qh = Load16(blk + offsetof(BlockQ6_K, qh) + 32 * kN + 16 * kH);
    // ((qh >> 2t) & 3) << 4 in each byte.
    const __m128i hi = kT >= 2 ? _mm_srli_epi16(qh, 2 * kT - 4) : _mm_slli_epi16(qh, 4 - 2 * kT);
    const __m128i q = _mm_or_si128(lo, _mm_and_si128(hi, _mm_set1_epi8(0x30)));
    return _mm_sub_epi8(q, _mm_set1_epi8(32));
  }
};

struct IQ4_XS {
  static constexpr int kValues = kQkK, kBytes = sizeof(BlockIQ4_XS), kChunks = 16;
  static constexpr int kGroupShift = 1;
  static constexpr Op kOp = Op::kMul;
  static void Scales(const uint8_t* blk, float* a, float*) {
    const float d = H(blk);
    // ls[ib] = ((scales_l[ib / 2] >> 4 (ib % 2)) & 0xF) | (((scales_h >> 2 ib) & 3) << 4).
    uint32_t sl;
    std::memcpy(&sl, blk + offsetof(BlockIQ4_XS, scales_l), 4);
    const __m256i lo =
        _mm256_srlv_epi32(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(
                              _mm_cvtsi32_si128(static_cast<int>(sl)),
                              _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0))),
                          _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    const __m256i hi =
        _mm256_srlv_epi32(_mm256_set1_epi32(half::LoadU16(blk + offsetof(BlockIQ4_XS, scales_h))),
                          _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i ls =
        _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xF)),
                        _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    ScaleTimes(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)), d, a);
  }
  template <int C>
  static __m128i Unpack(const uint8_t* blk) {
    return _mm_shuffle_epi8(Iq4Table(),
                            Nibbles<C % 2 == 1>(blk + offsetof(BlockIQ4_XS, qs) + 16 * (C / 2)));
  }
};

// f(Format{}) for the format of `type` (an IsKQuantFamily type); false for any other type.
template <typename F>
inline bool Visit(WeightType type, F&& f) {
  switch (type) {
    case WeightType::kQ4_0:
      return f(Q4_0{}), true;
    case WeightType::kQ4_1:
      return f(Q4_1{}), true;
    case WeightType::kQ5_0:
      return f(Q5_0{}), true;
    case WeightType::kQ5_1:
      return f(Q5_1{}), true;
    case WeightType::kQ2_K:
      return f(Q2_K{}), true;
    case WeightType::kQ3_K:
      return f(Q3_K{}), true;
    case WeightType::kQ4_K:
      return f(Q4_K{}), true;
    case WeightType::kQ5_K:
      return f(Q5_K{}), true;
    case WeightType::kQ6_K:
      return f(Q6_K{}), true;
    case WeightType::kIQ4_NL:
      return f(IQ4_NL{}), true;
    case WeightType::kIQ4_XS:
      return f(IQ4_XS{}), true;
    case WeightType::kMXFP4:
      return f(MXFP4{}), true;
    default:
      return false;
  }
}

// Groups of A / B per block.
template <typename Fmt>
inline constexpr int kGroups = Fmt::kChunks >> Fmt::kGroupShift;

// ---- Widening ------------------------------------------------------------------------------

#if defined(__AVX512F__)
// 16 values of chunk C as F32: float(q) * A, then +- B.
template <typename Fmt, int C>
inline __m512 Widen16(const uint8_t* blk, const float* a, const float* b) {
  constexpr int g = C >> Fmt::kGroupShift;
  const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Fmt::template Unpack<C>(blk)));
  const __m512 v = _mm512_mul_ps(q, _mm512_set1_ps(a[g]));
  if constexpr (Fmt::kOp == Op::kMulAdd) return _mm512_add_ps(v, _mm512_set1_ps(b[g]));
  if constexpr (Fmt::kOp == Op::kMulSub) return _mm512_sub_ps(v, _mm512_set1_ps(b[g]));
  return v;
}
#endif

// The same as two halves of 8 (AVX2): lo = values [16 C, 16 C + 8), hi = the next 8.
template <typename Fmt, int C>
inline void Widen8x2(const uint8_t* blk, const float* a, const float* b, __m256* lo, __m256* hi) {
  constexpr int g = C >> Fmt::kGroupShift;
  const __m128i q8 = Fmt::template Unpack<C>(blk);
  const __m256 va = _mm256_set1_ps(a[g]);
  __m256 l = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), va);
  __m256 h = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q8, 8))), va);
  if constexpr (Fmt::kOp != Op::kMul) {
    const __m256 vb = _mm256_set1_ps(b[g]);
    l = Fmt::kOp == Op::kMulAdd ? _mm256_add_ps(l, vb) : _mm256_sub_ps(l, vb);
    h = Fmt::kOp == Op::kMulAdd ? _mm256_add_ps(h, vb) : _mm256_sub_ps(h, vb);
  }
  *lo = l;
  *hi = h;
}

TG_ISA_END
}  // namespace textgen::ops::unpack

#endif  // __AVX2__

#endif  // TEXTGEN_ENGINE_OPS_QUANT_UNPACK_H_
