#include "engine/ops/kquant_dot.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_dot_more.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/kquant_tiles_avx2.h"
#include "engine/ops/quant_columns.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
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

#if defined(TG_KQUANT_512)

// ---- AVX-512 VNNI: tiles of 8 or 4 weight rows x up to 4 activation rows ---------------------
//
// (Q4_K itself runs in column lanes at these levels: engine/ops/quant_columns.h. Q5_K keeps
// Q4KTile below.)
//
// Per super-block and weight row the 4- or 6-bit values are unpacked once into 4 zmm of u8
// (64 values each) and the sub-block scales into 2 zmm of int16, then used by every activation
// row of the tile: VPDPBUSD (u8 x s8, 4 products per int32 lane, at most 4 * 63 * 128 < 2^15)
// on two value vectors, VPACKSSDW of the two into int16 words (exact: no lane saturates) and
// VPDPWSSD (x int16 scale, into int32 lanes) give exact int32 partial sums, which are
// converted and scaled in F32 once per super-block, lane by lane: one horizontal reduction per
// output, at the end of the row. Why the pack: per activation row it is 6 multiply ops on the
// port that does them instead of VPMADDUBSW + VPDPWSSD's 8 (the pack runs on another port), and
// tiles of 4 activation rows (beams, batched decode) are bound by that port. Compared with the
// per-super-block formula only the F32 summation order differs (each lane holds 16 products, at
// most 2^24 in magnitude, so its conversion is exact for Q4_K and for all but extreme Q6_K
// blocks).
//
// Weight rows are contiguous, so a tile of rows is one address range: each super-block step
// prefetches ahead (kquant_simd.h's Prefetch).

// y[i * ldy + j] = lane sum of acc[i][j], for any NR (simd::StoreSums takes 1 or 4k).
template <int MR, int NR>
inline void StoreTile(const __m512 (&acc)[MR][NR], float* y, int64_t ldy) {
  if constexpr (NR == 1 || NR % 4 == 0) {
    simd::StoreSums<MR, NR>(acc, y, ldy);
  } else {
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      TG_UNROLL
      for (int j = 0; j < NR; ++j) y[i * ldy + j] = simd::Reduce1(acc[i][j]);
    }
  }
}

inline __m512i Load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i Load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Word indices for VPERMW: 32 words, the first 16 copies of word a, the last 16 of word b.
struct alignas(64) WordIndex {
  uint16_t w[32];
};
constexpr WordIndex Quads(int a) {  // words 8q .. 8q + 7 copies of word a + q
  WordIndex r{};
  for (int k = 0; k < 32; ++k) r.w[k] = static_cast<uint16_t>(a + k / 8);
  return r;
}
// Q4_K: scale words 0-7 = sc[0..7], 8-15 = mn[0..7]. Plane vectors k = 2c + e hold sub-blocks
// (4c + e, 4c + 2 + e) (e = 0: low nibbles, 1: high), 32 values = 8 dword lanes each. The pack of
// planes 2c and 2c + 1 puts, in each 128-bit lane L, 4 words of plane 2c then 4 of plane 2c + 1,
// from its first half (L < 2) or second (L >= 2).
constexpr WordIndex Q4PackedScales(int c) {
  WordIndex r{};
  for (int k = 0; k < 32; ++k) {
    r.w[k] = static_cast<uint16_t>(4 * c + (k % 8 >= 4 ? 1 : 0) + (k / 8 >= 2 ? 2 : 0));
  }
  return r;
}
constexpr WordIndex kQ4Scale[2] = {Q4PackedScales(0), Q4PackedScales(1)};
// Q6_K: 16 scale words; vector k (values 64k .. 64k + 63) uses sc[4k .. 4k + 3], 4 dword lanes
// each. The pack of vectors 2p and 2p + 1: lane L holds sub-block 8p + L, then 8p + 4 + L.
constexpr WordIndex Q6PackedScales(int p) {
  WordIndex r{};
  for (int k = 0; k < 32; ++k) {
    r.w[k] = static_cast<uint16_t>(8 * p + (k % 8 >= 4 ? 4 : 0) + k / 8);
  }
  return r;
}
constexpr WordIndex kQ6Scale[2] = {Q6PackedScales(0), Q6PackedScales(1)};
// IQ4_XS (VPMADDUBSW, unpacked): vector k uses sub-blocks 4k .. 4k + 3, 8 words each.
constexpr WordIndex kIQ4Scale[2] = {Quads(0), Quads(4)};

inline __m512i LoadIndex(const WordIndex& i) { return _mm512_load_si512(i.w); }

// s + the products of two u8 value vectors wq[0..1] with the 128 s8 activations at x, each
// group of 4 summed (VPDPBUSD), packed to int16 words and multiplied by their scale words.
inline __m512i PackedDot(__m512i s, const __m512i* wq, const int8_t* x, __m512i scale) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i lo = _mm512_dpbusd_epi32(zero, wq[0], _mm512_loadu_si512(x));
  const __m512i hi = _mm512_dpbusd_epi32(zero, wq[1], _mm512_loadu_si512(x + 64));
  return _mm512_dpwssd_epi32(s, _mm512_packs_epi32(lo, hi), scale);
}

// The activations' qs of one super-block reordered for Q4_K: 64-byte pieces (sub-blocks of 32)
// 0 2 | 1 3 | 4 6 | 5 7, so that each piece meets one nibble plane of a 64-byte weight load.
void ReorderForQ4K(const BlockQ8_K* xq, int64_t count, int8_t* out) {
  static constexpr int kOrder[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t b = 0; b < count; ++b) {
    for (int s = 0; s < 8; ++s) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * kQkK + 32 * s),
                          Load256(xq[b].qs + 32 * kOrder[s]));
    }
  }
}

// The activations' qs reordered for IQ4_XS, whose sub-block ib (32 values) is qs[16 ib ..
// 16 ib + 15], low nibbles values 0-15 and high ones 16-31: piece k = 2c + e (64 bytes) holds
// the 16-value halves e of sub-blocks 4c .. 4c + 3, so that it meets nibble plane e of the
// weights' 64-byte load c.
void ReorderForIQ4XS(const BlockQ8_K* xq, int64_t count, int8_t* out) {
  for (int64_t b = 0; b < count; ++b) {
    for (int k = 0; k < 4; ++k) {
      for (int s = 0; s < 4; ++s) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b * kQkK + 64 * k + 16 * s),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(
                             xq[b].qs + 32 * (4 * (k / 2) + s) + 16 * (k % 2))));
      }
    }
  }
}

// Q4_K's min terms, per activation block: d x the sums of bsums pairs (one per sub-block of 32),
// out [count, 8].
void MinSumsForQ4K(const BlockQ8_K* xq, int64_t count, float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < count; ++b) {
    const __m256i pairs = _mm256_madd_epi16(Load256(xq[b].bsums), ones);
    _mm256_storeu_ps(out + 8 * b,
                     _mm256_mul_ps(_mm256_set1_ps(xq[b].d), _mm256_cvtepi32_ps(pairs)));
  }
}

// Q2_K's min terms, per activation block: d x bsums (one per sub-block of 16), out [count, 16].
void MinSumsForQ2K(const BlockQ8_K* xq, int64_t count, float* out) {
  for (int64_t b = 0; b < count; ++b) {
    _mm512_storeu_ps(
        out + 16 * b,
        _mm512_mul_ps(_mm512_set1_ps(xq[b].d),
                      _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(Load256(xq[b].bsums)))));
  }
}

// Activation rows [i0, i0 + MR) of one tile: Q8_K blocks xq (stride nb per row) and, for
// Q4_K and IQ4_XS, the reordered qs xr ([rows, nb, 256]); for Q4_K and Q2_K, the min terms xm
// ([rows, nb, xm_block]).
struct TileX {
  const BlockQ8_K* xq;
  const int8_t* xr;
  const float* xm;
  int64_t nb;
  int64_t xm_block = 8;  // floats of xm per block (Q2_K: 16)

  TileX Rows(int64_t i) const {
    return {xq + i * nb, xr ? xr + i * nb * kQkK : nullptr, xm ? xm + i * nb * xm_block : nullptr,
            nb, xm_block};
  }
};

// The loop every tile below shares: acc[MR][NR] zeroed; per super-block b the prefetch, then
// for each weight row j of the tile body(block, b, j, acc), which adds the block's products
// with activation rows [0, MR) to acc[i][j]; then the lane sums stored. body must inline (one
// copy per unrolled j, so that acc stays in registers).
#define TG_ALWAYS_INLINE __attribute__((always_inline))
template <typename Block, int MR, int NR, bool kPrefetch, typename Body>
[[gnu::always_inline]] inline void TileLoop(const uint8_t* w0, size_t row_bytes, const TileX& x,
                                            float* y, int64_t ldy, Body&& body) {
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < x.nb; ++b) {
    if constexpr (kPrefetch) Prefetch<NR, sizeof(Block)>(w0, row_bytes, b);
    TG_UNROLL
    for (int j = 0; j < NR; ++j)
      body(reinterpret_cast<const Block*>(w0 + j * row_bytes)[b], b, j, acc);
  }
  StoreTile<MR, NR>(acc, y, ldy);
}

// Q5_K's fifth bits: bit s of qh[l] belongs to value l of sub-block s. Plane vector k (sub-blocks
// 4c + e and 4c + 2 + e, k = 2c + e) tests bit 4c + e in its low 32 bytes and 4c + 2 + e in its
// high 32 against qh repeated in both halves.
inline __m512i Q5KBitSelect(int k) {
  const int lo = 4 * (k / 2) + k % 2;
  return _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << lo)),
                            _mm256_set1_epi8(static_cast<char>(1 << (lo + 2))), 1);
}

// Q4_K, or Q5_K (Block = BlockQ5_K: the same scales, mins and nibble planes, plus 16 added to
// each value whose bit in qh is set).
template <typename Block, int MR, int NR, bool kPrefetch>
inline void Q4KTile(const uint8_t* w0, size_t row_bytes, const TileX& x, float* y, int64_t ldy) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  TileLoop<Block, MR, NR, kPrefetch>(
      w0, row_bytes, x, y, ldy,
      [&](const Block& blk, int64_t b, int j, __m512(&acc)[MR][NR]) TG_ALWAYS_INLINE {
        const __m256i words16 = Q4KScaleWords(blk.scales);
        const __m512i words = _mm512_castsi256_si512(words16);
        const __m512i sc[2] = {_mm512_permutexvar_epi16(LoadIndex(kQ4Scale[0]), words),
                               _mm512_permutexvar_epi16(LoadIndex(kQ4Scale[1]), words)};
        __m512i wq[4];
        TG_UNROLL
        for (int c = 0; c < 2; ++c) {
          const __m512i q = Load512(blk.qs + 64 * c);
          wq[2 * c] = _mm512_and_si512(q, m4);
          wq[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        }
        if constexpr (kQ5) {
          const __m512i qh = _mm512_broadcast_i64x4(Load256(blk.qh));
          TG_UNROLL
          for (int k = 0; k < 4; ++k) {
            const __mmask64 hi = _mm512_test_epi8_mask(qh, Q5KBitSelect(k));
            wq[k] = _mm512_mask_add_epi8(wq[k], hi, wq[k], _mm512_set1_epi8(16));
          }
        }
        // F32 d and dmin broadcast; each activation row multiplies in its own d.
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(
            static_cast<uint32_t>(blk.d) | (static_cast<uint32_t>(blk.dmin) << 16))));
        const __m512 dw = _mm512_broadcastss_ps(dd);
        // dmin x the 8 mins, in lanes 0-7 (8-15 zero), once for all activation rows.
        const __m512 mins = _mm512_zextps256_ps512(_mm256_mul_ps(
            _mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
            _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(words16, 1)))));
        TG_UNROLL
        for (int i = 0; i < MR; ++i) {
          const int64_t ib = i * x.nb + b;
          __m512i s = _mm512_setzero_si512();
          TG_UNROLL
          for (int c = 0; c < 2; ++c)
            s = PackedDot(s, wq + 2 * c, x.xr + ib * kQkK + 128 * c, sc[c]);
          const __m512 dx = _mm512_set1_ps(x.xq[ib].d);
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[i][j]);
          acc[i][j] = _mm512_fnmadd_ps(mins, _mm512_zextps256_ps512(_mm256_loadu_ps(x.xm + ib * 8)),
                                       acc[i][j]);
        }
      });
}

// IQ4_XS's 8 signed sub-block scales (ls - 32) as int16 words 0-7: the low nibbles of
// scales_l in sub-block order, the 2-bit fields of scales_h shifted into bits 4-5.
inline __m128i IQ4XSScaleWords(const BlockIQ4_XS& blk) {
  uint32_t l;
  std::memcpy(&l, blk.scales_l, 4);
  const __m128i lv = _mm_cvtsi32_si128(static_cast<int>(l));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i low = _mm_cvtepu8_epi16(
      _mm_unpacklo_epi8(_mm_and_si128(lv, m4), _mm_and_si128(_mm_srli_epi16(lv, 4), m4)));
  const __m128i high = _mm_and_si128(
      _mm_slli_epi16(_mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(blk.scales_h)),
                                    _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                     4),
      _mm_set1_epi16(0x30));
  return _mm_sub_epi16(_mm_or_si128(low, high), _mm_set1_epi16(32));
}

// IQ4_XS: values are the signed table entries; as for the s8 x s8 of llama.cpp's AVX2 code, the
// products go through VPMADDUBSW as |v| x (x negated where v < 0): |v|, |x| <= 127, so the
// int16 pairs stay below 32767, and each lane's int32 sum below 2^24 (scales |ls - 32| <= 32).
template <int MR, int NR, bool kPrefetch>
inline void IQ4XSTile(const uint8_t* w0, size_t row_bytes, const TileX& x, float* y, int64_t ldy) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  TileLoop<BlockIQ4_XS, MR, NR, kPrefetch>(
      w0, row_bytes, x, y, ldy,
      [&](const BlockIQ4_XS& blk, int64_t b, int j, __m512(&acc)[MR][NR]) TG_ALWAYS_INLINE {
        const __m512i words = _mm512_castsi128_si512(IQ4XSScaleWords(blk));
        // Piece 2c + e uses sub-blocks 4c .. 4c + 3, 8 words each.
        const __m512i sc[2] = {_mm512_permutexvar_epi16(LoadIndex(kIQ4Scale[0]), words),
                               _mm512_permutexvar_epi16(LoadIndex(kIQ4Scale[1]), words)};
        __m512i wu[4];
        __mmask64 neg[4];
        TG_UNROLL
        for (int c = 0; c < 2; ++c) {
          const __m512i q = Load512(blk.qs + 64 * c);
          const __m512i nib[2] = {_mm512_and_si512(q, m4),
                                  _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)};
          TG_UNROLL
          for (int e = 0; e < 2; ++e) {
            const __m512i v = _mm512_shuffle_epi8(table, nib[e]);
            wu[2 * c + e] = _mm512_abs_epi8(v);
            neg[2 * c + e] = _mm512_movepi8_mask(v);
          }
        }
        const __m512 dw = _mm512_set1_ps(half::F16ToF32(blk.d));
        TG_UNROLL
        for (int i = 0; i < MR; ++i) {
          const int8_t* xr = x.xr + (i * x.nb + b) * kQkK;
          __m512i s = _mm512_setzero_si512();
          TG_UNROLL
          for (int k = 0; k < 4; ++k) {
            const __m512i xv = Load512(xr + 64 * k);
            const __m512i xs = _mm512_mask_sub_epi8(xv, neg[k], _mm512_setzero_si512(), xv);
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(wu[k], xs), sc[k / 2]);
          }
          const __m512 dx = _mm512_set1_ps(x.xq[i * x.nb + b].d);
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[i][j]);
        }
      });
}

// Q6_K and Q3_K (values stored with an offset, 16-value sub-blocks): acc[i][j] += the block's
// products with activation row i, the offset's share off16 x bsums starting each lane sum.
template <int MR, int NR>
[[gnu::always_inline]] inline void AddOffsetRows(const __m512i (&wq)[4], const __m512i (&sc)[2],
                                                 __m256i off16, __m512 dw, const TileX& x,
                                                 int64_t b, int j, __m512 (&acc)[MR][NR]) {
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    const BlockQ8_K& a = x.xq[i * x.nb + b];
    __m512i s = _mm512_zextsi256_si512(_mm256_madd_epi16(off16, Load256(a.bsums)));
    TG_UNROLL
    for (int p = 0; p < 2; ++p) s = PackedDot(s, wq + 2 * p, a.qs + 128 * p, sc[p]);
    acc[i][j] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), acc[i][j]);
  }
}

template <int MR, int NR, bool kPrefetch>
inline void Q6KTile(const uint8_t* w0, size_t row_bytes, const TileX& x, float* y, int64_t ldy) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  TileLoop<BlockQ6_K, MR, NR, kPrefetch>(
      w0, row_bytes, x, y, ldy,
      [&](const BlockQ6_K& blk, int64_t b, int j, __m512(&acc)[MR][NR]) TG_ALWAYS_INLINE {
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
        // The -32 offset of every value: -32 * sc[j] * bsums[j] per sub-block of 16.
        const __m256i off16 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
        const __m512i sc[2] = {
            _mm512_permutexvar_epi16(LoadIndex(kQ6Scale[0]), _mm512_castsi256_si512(sc16)),
            _mm512_permutexvar_epi16(LoadIndex(kQ6Scale[1]), _mm512_castsi256_si512(sc16))};
        __m512i wq[4];
        TG_UNROLL
        for (int h = 0; h < 2; ++h) {
          // Values 128h + [0, 64): low nibbles of ql[64h ..], bits 0-1 (first 32) and 2-3 (next
          // 32) of qh[32h ..]; values 128h + [64, 128): high nibbles, bits 4-5 and 6-7.
          const __m512i l = Load512(blk.ql + 64 * h);
          const __m256i hb = Load256(blk.qh + 32 * h);
          const __m512i hz =
              _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);
          wq[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                      _mm512_and_si512(_mm512_slli_epi16(hz, 4), m30));
          wq[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                          _mm512_and_si512(hz, m30));
        }
        AddOffsetRows(wq, sc, off16, _mm512_set1_ps(half::F16ToF32(blk.d)), x, b, j, acc);
      });
}

// Q2_K / Q3_K: value vector k = 2h + e (values 64k .. 64k + 63, natural order) holds the
// 2-bit planes 2e and 2e + 1 of qs[32h .. 32h + 31] (value 128h + 32j + l is bits 2j, 2j + 1 of
// qs[32h + l]): the 32 bytes in both halves of a zmm, each half shifted by its plane.
inline void Unpack2Bit512(const uint8_t* qs, __m512i (&wq)[4]) {
  const __m512i m3 = _mm512_set1_epi8(3);
  TG_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m512i q = _mm512_broadcast_i64x4(Load256(qs + 32 * h));
    TG_UNROLL
    for (int e = 0; e < 2; ++e) {
      const __m512i shift =
          _mm512_inserti64x4(_mm512_set1_epi64(4 * e), _mm256_set1_epi64x(4 * e + 2), 1);
      wq[2 * h + e] = _mm512_and_si512(_mm512_srlv_epi64(q, shift), m3);
    }
  }
}

// Q3_K's 16 scales (6 bits, stored + 32) as signed int16 words, Q3KScaleBits on 4 dwords at
// once. Reads exactly the 12 bytes (a block may end the mapping 2 bytes later).
inline __m256i Q3KScaleWords(const uint8_t* packed) {
  int32_t hi;
  std::memcpy(&hi, packed + 8, 4);
  const __m128i v = _mm_insert_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed)), hi,
                                     2);  // aux0 aux1 aux2 -
  const __m128i lo = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 1, 0)), _mm_setr_epi32(0, 0, 4, 4)),
      _mm_set1_epi32(0x0f0f0f0f));
  const __m128i top = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)), _mm_setr_epi32(0, 2, 4, 6)),
      _mm_set1_epi32(0x03030303));
  const __m128i sc = _mm_or_si128(lo, _mm_slli_epi32(top, 4));
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32));
}

// Q3_K: values u - 4 (u = 2 bits + 4 x the hmask bit, 0 .. 7) with 16 signed scales; the -4 of
// every value goes through the activation sums (-4 sc per sub-block), as Q6_K's -32.
template <int MR, int NR, bool kPrefetch>
inline void Q3KTile(const uint8_t* w0, size_t row_bytes, const TileX& x, float* y, int64_t ldy) {
  TileLoop<BlockQ3_K, MR, NR, kPrefetch>(
      w0, row_bytes, x, y, ldy,
      [&](const BlockQ3_K& blk, int64_t b, int j, __m512(&acc)[MR][NR]) TG_ALWAYS_INLINE {
        const __m256i sc16 = Q3KScaleWords(blk.scales);
        const __m256i off16 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 2));
        const __m512i sc[2] = {
            _mm512_permutexvar_epi16(LoadIndex(kQ6Scale[0]), _mm512_castsi256_si512(sc16)),
            _mm512_permutexvar_epi16(LoadIndex(kQ6Scale[1]), _mm512_castsi256_si512(sc16))};
        __m512i wq[4];
        Unpack2Bit512(blk.qs, wq);
        // Bit 4h + j of hmask[l] adds 4 to value 128h + 32j + l: vector 2h + e tests bit
        // 4h + 2e in its low 32 bytes and 4h + 2e + 1 in its high 32.
        const __m512i hm = _mm512_broadcast_i64x4(Load256(blk.hmask));
        TG_UNROLL
        for (int k = 0; k < 4; ++k) {
          const int bit = 4 * (k / 2) + 2 * (k % 2);
          const __m512i select =
              _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << bit)),
                                 _mm256_set1_epi8(static_cast<char>(2 << bit)), 1);
          wq[k] = _mm512_mask_add_epi8(wq[k], _mm512_test_epi8_mask(hm, select), wq[k],
                                       _mm512_set1_epi8(4));
        }
        AddOffsetRows(wq, sc, off16, _mm512_set1_ps(half::F16ToF32(blk.d)), x, b, j, acc);
      });
}

// Q2_K: values 0 .. 3 with a 4-bit scale (low nibble) and min (high nibble) per 16 values; the
// min terms as Q4_K's (dmin x mins per weight block, d_x x bsums per activation block).
template <int MR, int NR, bool kPrefetch>
inline void Q2KTile(const uint8_t* w0, size_t row_bytes, const TileX& x, float* y, int64_t ldy) {
  TileLoop<BlockQ2_K, MR, NR, kPrefetch>(
      w0, row_bytes, x, y, ldy,
      [&](const BlockQ2_K& blk, int64_t b, int j, __m512(&acc)[MR][NR]) TG_ALWAYS_INLINE {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m512i sc16 =
            _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(packed, m4)));
        const __m512i sc[2] = {_mm512_permutexvar_epi16(LoadIndex(kQ6Scale[0]), sc16),
                               _mm512_permutexvar_epi16(LoadIndex(kQ6Scale[1]), sc16)};
        __m512i wq[4];
        Unpack2Bit512(blk.qs, wq);
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(
            static_cast<uint32_t>(blk.d) | (static_cast<uint32_t>(blk.dmin) << 16))));
        const __m512 dw = _mm512_broadcastss_ps(dd);
        // dmin x the 16 mins, once for all activation rows.
        const __m512 mins = _mm512_mul_ps(
            _mm512_broadcastss_ps(_mm_movehdup_ps(dd)),
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(packed, 4), m4))));
        TG_UNROLL
        for (int i = 0; i < MR; ++i) {
          const int64_t ib = i * x.nb + b;
          const BlockQ8_K& a = x.xq[ib];
          __m512i s = _mm512_setzero_si512();
          TG_UNROLL
          for (int p = 0; p < 2; ++p) s = PackedDot(s, wq + 2 * p, a.qs + 128 * p, sc[p]);
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)),
                                      acc[i][j]);
          acc[i][j] = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(x.xm + ib * 16), acc[i][j]);
        }
      });
}

// Rows [r0, r1) in tiles of 8 (n <= 2) or 4 weight rows, then single rows (multi_row, by default
// kMultiRow), or one row at a time: Q6_K below 4 activation rows, whose tiles of 4 or 8 rows
// streamed from DRAM at half the rate of single rows on a Zen 5 machine (~18 vs ~35 GB/s per
// thread, measured with ops-bench --kquant while the prefetches above were compiled away), while
// from L2 they are faster (74 vs 53 GB/s). Re-measured with working prefetches on the Ice Lake VM:
// 4-row tiles still no faster from DRAM (9.4-10.8 vs 11 GB/s at n = 1). Per tile, the activation
// rows in groups of 4 (the weights of the tile come from L1 after the first group).
template <template <int, int, bool> class Tile, bool kMultiRow>
void Rows512(const WeightView& w, const TileX& x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1, bool multi_row = kMultiRow) {
  const size_t rb = w.row_bytes();
  auto groups = [&]<int NR>(int64_t r) {
    const uint8_t* w0 = w.row(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const TileX xi = x.Rows(i);
      if (i == 0) {
        Tile<4, NR, true>::Run(w0, rb, xi, y + i * ldy + r, ldy);
      } else {
        Tile<4, NR, false>::Run(w0, rb, xi, y + i * ldy + r, ldy);
      }
    }
    const TileX xi = x.Rows(i);
    float* yi = y + i * ldy + r;
    switch (n - i) {
      case 3:
        return i == 0 ? Tile<3, NR, true>::Run(w0, rb, xi, yi, ldy)
                      : Tile<3, NR, false>::Run(w0, rb, xi, yi, ldy);
      case 2:
        return i == 0 ? Tile<2, NR, true>::Run(w0, rb, xi, yi, ldy)
                      : Tile<2, NR, false>::Run(w0, rb, xi, yi, ldy);
      case 1:
        return i == 0 ? Tile<1, NR, true>::Run(w0, rb, xi, yi, ldy)
                      : Tile<1, NR, false>::Run(w0, rb, xi, yi, ldy);
      default:
        return;
    }
  };
  int64_t r = r0;
  if (multi_row) {
    if (n <= 2) {
      // Few activation rows: 8 weight rows per tile (fewer, longer steps; measured faster).
      for (; r + 8 <= r1; r += 8) groups.template operator()<8>(r);
    }
    for (; r + 4 <= r1; r += 4) groups.template operator()<4>(r);
  }
  for (; r < r1; ++r) groups.template operator()<1>(r);
}

template <int MR, int NR, bool kPrefetch>
struct Q5KTileFn {
  static void Run(const uint8_t* w0, size_t rb, const TileX& x, float* y, int64_t ldy) {
    Q4KTile<BlockQ5_K, MR, NR, kPrefetch>(w0, rb, x, y, ldy);
  }
};
template <int MR, int NR, bool kPrefetch>
struct IQ4XSTileFn {
  static void Run(const uint8_t* w0, size_t rb, const TileX& x, float* y, int64_t ldy) {
    IQ4XSTile<MR, NR, kPrefetch>(w0, rb, x, y, ldy);
  }
};
template <int MR, int NR, bool kPrefetch>
struct Q3KTileFn {
  static void Run(const uint8_t* w0, size_t rb, const TileX& x, float* y, int64_t ldy) {
    Q3KTile<MR, NR, kPrefetch>(w0, rb, x, y, ldy);
  }
};
template <int MR, int NR, bool kPrefetch>
struct Q2KTileFn {
  static void Run(const uint8_t* w0, size_t rb, const TileX& x, float* y, int64_t ldy) {
    Q2KTile<MR, NR, kPrefetch>(w0, rb, x, y, ldy);
  }
};
template <int MR, int NR, bool kPrefetch>
struct Q6KTileFn {
  static void Run(const uint8_t* w0, size_t rb, const TileX& x, float* y, int64_t ldy) {
    Q6KTile<MR, NR, kPrefetch>(w0, rb, x, y, ldy);
  }
};

#endif  // TG_KQUANT_512

}  // namespace

namespace portable {

void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  if (w.type == WeightType::kQ4_K) return KQuantRows<BlockQ4_K, DotQ4K>(w, xq, n, y, ldy, r0, r1);
  if (w.type == WeightType::kQ6_K) return KQuantRows<BlockQ6_K, DotQ6K>(w, xq, n, y, ldy, r0, r1);
  if (w.type == WeightType::kQ5_K || w.type == WeightType::kIQ4_XS) {
    return portable::GemvKQuantInt8More(w, xq, n, y, ldy, r0, r1);
  }
}
}  // namespace portable

#if defined(TG_KQUANT_512)
namespace {

void Prepare512(WeightType t, const BlockQ8_K* xq, int64_t count, KQuantPrepared* p) {
  const size_t c = static_cast<size_t>(count);
  if (t == WeightType::kQ4_K) {
    p->xs.resize(c * 8);
    SubBlockSumsForQ4K(xq, count, p->xs.data());
  } else if (t == WeightType::kQ5_K) {
    p->xr.resize(c * kQkK);
    p->xm.resize(c * 8);
    ReorderForQ4K(xq, count, p->xr.data());
    MinSumsForQ4K(xq, count, p->xm.data());
  } else if (t == WeightType::kIQ4_XS) {
    p->xr.resize(c * kQkK);
    ReorderForIQ4XS(xq, count, p->xr.data());
  } else if (t == WeightType::kQ2_K) {
    p->xm.resize(c * 16);
    MinSumsForQ2K(xq, count, p->xm.data());
  }
}

// Activation rows [i0, i0 + n) of a prepared call.
void Run512(const WeightView& w, const BlockQ8_K* xq, const KQuantPrepared& p, int64_t i0,
            int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkK;
  switch (w.type) {
    case WeightType::kQ4_K:
      return GemvQ4KColumns(w, xq + i0 * nb, p.xs.data() + i0 * nb * 8, n, y, ldy, r0, r1);
    case WeightType::kQ5_K:
      return Rows512<Q5KTileFn, true>(w, TileX{xq, p.xr.data(), p.xm.data(), nb}.Rows(i0), n, y,
                                      ldy, r0, r1);
    case WeightType::kIQ4_XS:
      return Rows512<IQ4XSTileFn, true>(w, TileX{xq, p.xr.data(), nullptr, nb}.Rows(i0), n, y, ldy,
                                        r0, r1);
    case WeightType::kQ6_K:
      // Multi-row tiles only for calls of 4 rows or more (the weight block is read from L2 once
      // per 4 activation rows): Q6_K prefill-128 of stories110M 894-923 -> 940-1044 tok/s (Ice
      // Lake, 4 interleaved rounds). At n = 4 (beams) they measured no better end to end there,
      // but on the Emerald Rapids VM ops-bench's 32000 x 768 call went 1,842 -> 1,532 us and
      // beam 4 of stories110M Q6_K 6.3-6.5 -> 5.2-6.3 ms per token (3 rounds, alternated).
      return Rows512<Q6KTileFn, false>(w, TileX{xq, nullptr, nullptr, nb}.Rows(i0), n, y, ldy, r0,
                                       r1, n >= 4);
    case WeightType::kQ3_K:
      return Rows512<Q3KTileFn, true>(w, TileX{xq, nullptr, nullptr, nb}.Rows(i0), n, y, ldy, r0,
                                      r1);
    case WeightType::kQ2_K:
      return Rows512<Q2KTileFn, true>(w, TileX{xq, nullptr, p.xm.data(), nb, 16}.Rows(i0), n, y,
                                      ldy, r0, r1);
    default:
      return;
  }
}

}  // namespace
#endif  // TG_KQUANT_512

void GemvKQuantInt8(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
#if defined(TG_KQUANT_512)
  // Prepared per call here (each thread for its own range); Linear prepares once per call.
  thread_local KQuantPrepared p;
  Prepare512(w.type, xq, n * (w.in / kQkK), &p);
  Run512(w, xq, p, 0, n, y, ldy, r0, r1);
#elif defined(__AVX2__)
  // Q4_K, Q5_K, Q6_K, IQ4_XS: one weight row x up to 4 activation rows per tile.
  if (GemvKQuantTilesAvx2(w, xq, n, y, ldy, r0, r1)) return;
#else
  if (w.type == WeightType::kQ5_K || w.type == WeightType::kIQ4_XS) {
    return GemvKQuantInt8More(w, xq, n, y, ldy, r0, r1);
  }
  portable::GemvKQuantInt8(w, xq, n, y, ldy, r0, r1);
#endif
}

bool PrepareKQuantInt8(WeightType t, const BlockQ8_K* xq, int64_t n, int64_t nb,
                       KQuantPrepared* prepared) {
#if defined(TG_KQUANT_512)
  switch (t) {
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
    case WeightType::kIQ4_XS:
      Prepare512(t, xq, n * nb, prepared);
      return true;
    default:
      return false;
  }
#else
  (void)t, (void)xq, (void)n, (void)nb, (void)prepared;
  return false;
#endif
}

void GemvKQuantInt8Prepared(const WeightView& w, const BlockQ8_K* xq,
                            const KQuantPrepared* prepared, int64_t i0, int64_t n, float* y,
                            int64_t ldy, int64_t r0, int64_t r1) {
#if defined(TG_KQUANT_512)
  if (prepared != nullptr) return Run512(w, xq, *prepared, i0, n, y, ldy, r0, r1);
#else
  (void)prepared;
#endif
  const BlockQ8_K* xi = xq + i0 * (w.in / kQkK);
  if (HasKQuantInt8(w.type)) return GemvKQuantInt8(w, xi, n, y, ldy, r0, r1);
  GemvKQuantInt8More(w, xi, n, y, ldy, r0, r1);
}

TG_ISA_END
}  // namespace textgen::ops
