#include "engine/ops/kquant_tiles_avx2.h"

#include <type_traits>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN

#if defined(__AVX2__)
namespace {

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// VPSHUFB patterns that fill a lane with one of its int16 words: word `lo` in the low 128-bit
// lane, word `hi` in the high one.
struct alignas(32) WordPattern {
  int8_t b[32];
};
constexpr WordPattern Words(int lo, int hi) {
  WordPattern p{};
  for (int k = 0; k < 32; ++k) p.b[k] = static_cast<int8_t>(2 * (k < 16 ? lo : hi) + k % 2);
  return p;
}
// Q4_K: vector v (values 32v .. 32v + 31) is sub-block v; the scales are words 0-7 of a lane.
constexpr WordPattern kSubBlock[8] = {Words(0, 0), Words(1, 1), Words(2, 2), Words(3, 3),
                                      Words(4, 4), Words(5, 5), Words(6, 6), Words(7, 7)};
// Q6_K: vector v is sub-blocks 2v (its first 16 values, the low lane) and 2v + 1: words
// 2 (v % 4) and 2 (v % 4) + 1 of the half (v / 4) of the 16 scales.
constexpr WordPattern kHalfPair[4] = {Words(0, 1), Words(2, 3), Words(4, 5), Words(6, 7)};

inline __m256i Shuffle(__m256i v, const WordPattern& p) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(p.b)));
}

// How a format's super-block sum differs from the plain sum of scaled u8 x s8 products.
enum class Kind {
  kMins,    // Q2_K, Q4_K, Q5_K: minus dmin * the sub-block mins times the activation sums
  kOffset,  // Q3_K, Q6_K: values stored + 4 / + 32; the offset's sum comes from the
            // activation sums
  kSigned,  // IQ4_XS: signed values; |v| x (x with v's sign) through maddubs
};

// One super-block of one weight row, unpacked: vector v holds values 32v .. 32v + 31 as u8
// (Q6_K: q + 32, 0 .. 63; IQ4_XS: |v|) and their int16 scales (one per 16 values, as maddubs
// pairs them).
struct Unpacked {
  __m256i q[8];
  __m256i sc[8];
  __m256i sign[8];  // IQ4_XS: the signed values (their signs applied to the activations)
  __m256i mins;     // Q2_K, Q4_K, Q5_K: the min of bsums[k]'s 16 values in word k (for madd)
  __m256i offset;   // Q3_K, Q6_K: -4 (sc[k] - 32) / -32 sc[k] in word k, the same
  __m256 d, dmin;   // broadcast F16 scales (dmin: Q2_K, Q4_K, Q5_K)
};

// Bit v of byte l of `bits` is a high bit of value l of vector v: added as 1 << kPos (Q5_K's
// fifth bit, kPos 4; Q3_K's third, kPos 2). The 16-bit shift's spill from the next byte is
// masked off.
template <int kPos>
inline void AddHighBits(__m256i bits, Unpacked* u) {
  const __m256i one = _mm256_set1_epi8(1);
  TG_UNROLL
  for (int v = 0; v < 8; ++v) {
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(bits, v), one);
    u->q[v] = _mm256_or_si256(u->q[v], _mm256_slli_epi16(bit, kPos));
  }
}

// Q4_K / Q5_K: qs[32p + l] holds value l of sub-block 2p (low nibble) and 2p + 1 (high);
// Q5_K's fifth bit of value l of sub-block s is bit s of qh[l].
template <typename Block>
inline void UnpackQ4K(const Block& blk, Unpacked* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i words = Q4KScaleWords(blk.scales);
  const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(words));
  const __m128i mn = _mm256_extracti128_si256(words, 1);
  u->mins = _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn));
  TG_UNROLL
  for (int p = 0; p < 4; ++p) {
    const __m256i q = Load(blk.qs + 32 * p);
    u->q[2 * p] = _mm256_and_si256(q, m4);
    u->q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
  }
  if constexpr (std::is_same_v<Block, BlockQ5_K>) AddHighBits<4>(Load(blk.qh), u);
  TG_UNROLL
  for (int v = 0; v < 8; ++v) u->sc[v] = Shuffle(sc, kSubBlock[v]);
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(
      static_cast<int>(static_cast<uint32_t>(blk.d) | (static_cast<uint32_t>(blk.dmin) << 16))));
  u->d = _mm256_broadcastss_ps(dd);
  u->dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
}

// Formats with 16 scales per super-block (one per 16 values, int16 words of sc16): vector v's
// are words 2v (its low lane) and 2v + 1.
inline void SpreadScales16(__m256i sc16, Unpacked* u) {
  const __m256i halves[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                             _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  TG_UNROLL
  for (int v = 0; v < 8; ++v) u->sc[v] = Shuffle(halves[v / 4], kHalfPair[v % 4]);
}

// Q6_K: values 128h + [0, 32) are the low nibbles of ql[64h ..] with bits 0-1 of qh[32h ..],
// [32, 64) those of ql[64h + 32 ..] with bits 2-3, [64, 96) the high nibbles of ql[64h ..] with
// bits 4-5, [96, 128) the high nibbles of ql[64h + 32 ..] with bits 6-7.
inline void Unpack(const BlockQ6_K& blk, Unpacked* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  TG_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = Load(blk.ql + 64 * h), l1 = Load(blk.ql + 64 * h + 32);
    const __m256i hb = Load(blk.qh + 32 * h);
    auto high = [&](int shift) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, shift), m3), 4);
    };
    u->q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m4), high(0));
    u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), high(2));
    u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), high(4));
    u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), high(6));
  }
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
  u->offset = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
  SpreadScales16(sc16, u);
  u->d = _mm256_set1_ps(half::F16ToF32(blk.d));
}

// Q2_K / Q3_K: value 128h + 32j + l (vector 4h + j) is bits 2j, 2j + 1 of qs[32h + l]; Q3_K adds
// bit 4h + j of hmask[l] as 4.
template <typename Block>
inline void Unpack2Bit(const Block& blk, Unpacked* u) {
  const __m256i m3 = _mm256_set1_epi8(3);
  TG_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m256i q = Load(blk.qs + 32 * h);
    TG_UNROLL
    for (int j = 0; j < 4; ++j) {
      u->q[4 * h + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
    }
  }
  if constexpr (std::is_same_v<Block, BlockQ3_K>) AddHighBits<2>(Load(blk.hmask), u);
}

// Q2_K: 16 sub-blocks of 16 with a 4-bit scale (low nibble) and min (high nibble) each.
inline void Unpack(const BlockQ2_K& blk, Unpacked* u) {
  Unpack2Bit(blk, u);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  u->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
  SpreadScales16(_mm256_cvtepu8_epi16(_mm_and_si128(packed, m4)), u);
  const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(
      static_cast<int>(static_cast<uint32_t>(blk.d) | (static_cast<uint32_t>(blk.dmin) << 16))));
  u->d = _mm256_broadcastss_ps(dd);
  u->dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(dd));
}

// Q3_K: values u - 4 (u = 0 .. 7), 16 signed 6-bit scales sc - 32; the -4 of every value goes
// through the activation sums: -4 (sc - 32) per sub-block.
inline void Unpack(const BlockQ3_K& blk, Unpacked* u) {
  Unpack2Bit(blk, u);
  int8_t sc[16];
  Q3KScaleBits(blk.scales, sc);
  const __m256i sc16 =
      _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                       _mm256_set1_epi16(32));
  u->offset = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 2));
  SpreadScales16(sc16, u);
  u->d = _mm256_set1_ps(half::F16ToF32(blk.d));
}

// IQ4_XS: sub-block v is qs[16v .. 16v + 15], values 0-15 in the low nibbles and 16-31 in the
// high ones, through the non-linear table (|v| <= 127: the sign trick cannot meet -128).
inline void Unpack(const BlockIQ4_XS& blk, Unpacked* u) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  TG_UNROLL
  for (int v = 0; v < 8; ++v) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * v));
    const __m256i val =
        _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
    u->sign[v] = val;
    u->q[v] = _mm256_sign_epi8(val, val);
    u->sc[v] = _mm256_set1_epi16(static_cast<int16_t>(IQ4XSScaleBits(blk, v) - 32));
  }
  u->d = _mm256_set1_ps(half::F16ToF32(blk.d));
}

inline void Unpack(const BlockQ4_K& blk, Unpacked* u) { UnpackQ4K(blk, u); }
inline void Unpack(const BlockQ5_K& blk, Unpacked* u) { UnpackQ4K(blk, u); }

template <typename Block>
constexpr Kind kKindOf = Kind::kMins;  // Q2_K, Q4_K, Q5_K
template <>
constexpr Kind kKindOf<BlockQ3_K> = Kind::kOffset;
template <>
constexpr Kind kKindOf<BlockQ6_K> = Kind::kOffset;
template <>
constexpr Kind kKindOf<BlockIQ4_XS> = Kind::kSigned;

// acc[i] += the super-block's dot product with activation row i, lane by lane: d_x d_w sumi
// (- d_x dmin_w summins for Q4_K / Q5_K). Each lane's int32 sum is exact, and exact in F32
// below 2^24 (as the AVX-512 tiles).
template <Kind kKind, int MR>
inline void AddRows(const Unpacked& u, const BlockQ8_K* xq, int64_t nb, __m256 (&acc)[MR]) {
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    const BlockQ8_K& a = xq[i * nb];
    const __m256i bsums = Load(a.bsums);
    __m256i s =
        kKind == Kind::kOffset ? _mm256_madd_epi16(u.offset, bsums) : _mm256_setzero_si256();
    TG_UNROLL
    for (int v = 0; v < 8; ++v) {
      __m256i x = Load(a.qs + 32 * v);
      if constexpr (kKind == Kind::kSigned) x = _mm256_sign_epi8(x, u.sign[v]);
      s = MulAddU8S8(s, u.q[v], x, u.sc[v]);
    }
    const __m256 dx = _mm256_set1_ps(a.d);
    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(u.d, dx), acc[i]);
    if constexpr (kKind == Kind::kMins) {
      const __m256 m = _mm256_cvtepi32_ps(_mm256_madd_epi16(u.mins, bsums));
      acc[i] = _mm256_fnmadd_ps(m, _mm256_mul_ps(u.dmin, dx), acc[i]);
    }
  }
}

// One weight row x activation rows [0, MR) of xq ([MR, nb] blocks): y[i * ldy]. The first
// group of a row prefetches the weights ahead (rows are contiguous).
template <typename Block, int MR, bool kPrefetch>
void Tile(const Block* row, int64_t nb, const BlockQ8_K* xq, float* y, int64_t ldy) {
  __m256 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kPrefetch) {
      Prefetch<1, sizeof(Block)>(reinterpret_cast<const uint8_t*>(row), nb * sizeof(Block), b);
    }
    Unpacked u;
    Unpack(row[b], &u);
    AddRows<kKindOf<Block>, MR>(u, xq + b, nb, acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) y[i * ldy] = simd::Reduce1(acc[i]);
}

// Per weight row, the activation rows in groups of 4 (the row stays in L1 between groups).
template <typename Block>
void Rows(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy, int64_t r0,
          int64_t r1) {
  const int64_t nb = w.in / kQkK;
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w.row(r));
    // Activation rows [i, i + MR): the row's first group prefetches its weights.
    auto tile = [&]<int MR>(int64_t i0) {
      const BlockQ8_K* xi = xq + i0 * nb;
      float* yi = y + i0 * ldy + r;
      i0 == 0 ? Tile<Block, MR, true>(row, nb, xi, yi, ldy)
              : Tile<Block, MR, false>(row, nb, xi, yi, ldy);
    };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) tile.template operator()<4>(i);
    switch (n - i) {
      case 3:
        tile.template operator()<3>(i);
        break;
      case 2:
        tile.template operator()<2>(i);
        break;
      case 1:
        tile.template operator()<1>(i);
        break;
      default:
        break;
    }
  }
}

}  // namespace

bool GemvKQuantTilesAvx2(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                         int64_t r0, int64_t r1) {
  switch (w.type) {
    case WeightType::kQ2_K:
      Rows<BlockQ2_K>(w, xq, n, y, ldy, r0, r1);
      return true;
    case WeightType::kQ3_K:
      Rows<BlockQ3_K>(w, xq, n, y, ldy, r0, r1);
      return true;
    case WeightType::kQ4_K:
      Rows<BlockQ4_K>(w, xq, n, y, ldy, r0, r1);
      return true;
    case WeightType::kQ5_K:
      Rows<BlockQ5_K>(w, xq, n, y, ldy, r0, r1);
      return true;
    case WeightType::kQ6_K:
      Rows<BlockQ6_K>(w, xq, n, y, ldy, r0, r1);
      return true;
    case WeightType::kIQ4_XS:
      Rows<BlockIQ4_XS>(w, xq, n, y, ldy, r0, r1);
      return true;
    default:
      return false;
  }
}
#else
bool GemvKQuantTilesAvx2(const WeightView&, const BlockQ8_K*, int64_t, float*, int64_t, int64_t,
                         int64_t) {
  return false;
}
#endif  // __AVX2__

TG_ISA_END
}  // namespace textgen::ops
