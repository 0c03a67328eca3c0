#include "engine/ops/quant_dot_small.h"

#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/quant_columns.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// ---- portable dot products per block: the definition the SIMD versions follow ----

// Weight block -> its 32 integer values (value k = q[k], before the block's offset) and the
// offset every value carries (Q4_0: -8, Q5_0: -16, others 0; IQ4_NL values are the table's).
template <typename Block>
void Values(const Block& b, int q[kQkSmall], int* offset);

template <>
void Values(const BlockQ4_0& b, int q[kQkSmall], int* offset) {
  for (int l = 0; l < 16; ++l) {
    q[l] = b.qs[l] & 0xF;
    q[l + 16] = b.qs[l] >> 4;
  }
  *offset = -8;
}
template <>
void Values(const BlockQ4_1& b, int q[kQkSmall], int* offset) {
  for (int l = 0; l < 16; ++l) {
    q[l] = b.qs[l] & 0xF;
    q[l + 16] = b.qs[l] >> 4;
  }
  *offset = 0;
}
template <typename Block5>
void Values5(const Block5& b, int q[kQkSmall]) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int l = 0; l < 16; ++l) {
    q[l] = (b.qs[l] & 0xF) | (((qh >> l) & 1) << 4);
    q[l + 16] = (b.qs[l] >> 4) | (((qh >> (l + 16)) & 1) << 4);
  }
}
template <>
void Values(const BlockQ5_0& b, int q[kQkSmall], int* offset) {
  Values5(b, q);
  *offset = -16;
}
template <>
void Values(const BlockQ5_1& b, int q[kQkSmall], int* offset) {
  Values5(b, q);
  *offset = 0;
}
template <>
void Values(const BlockIQ4_NL& b, int q[kQkSmall], int* offset) {
  for (int l = 0; l < 16; ++l) {
    q[l] = kIq4nlValues[b.qs[l] & 0xF];
    q[l + 16] = kIq4nlValues[b.qs[l] >> 4];
  }
  *offset = 0;
}

template <>
void Values(const BlockMXFP4& b, int q[kQkSmall], int* offset) {
  for (int l = 0; l < 16; ++l) {
    q[l] = kMxfp4Values[b.qs[l] & 0xF];
    q[l + 16] = kMxfp4Values[b.qs[l] >> 4];
  }
  *offset = 0;
}

template <typename Block>
constexpr bool kHasMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
// The formats whose 4-bit codes index a signed int8 table (IQ4_NL, MXFP4).
template <typename Block>
constexpr bool kTable = std::is_same_v<Block, BlockIQ4_NL> || std::is_same_v<Block, BlockMXFP4>;

// The block's scale as F32: its F16 d, or MXFP4's E8M0 byte (half the scale: the table is
// doubled).
template <typename Block>
inline float Scale(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    return Mxfp4HalfScale(b.e);
  } else {
    return half::F16ToF32(b.d);
  }
}

template <typename Block>
float Dot(const Block& w, const BlockQ8_1& a) {
  int q[kQkSmall], offset;
  Values(w, q, &offset);
  int32_t sumi = offset * a.sum;
  for (int l = 0; l < kQkSmall; ++l) sumi += q[l] * a.qs[l];
  const float r = Scale(w) * a.d * static_cast<float>(sumi);
  if constexpr (kHasMin<Block>) return r + half::F16ToF32(w.m) * a.s;
  return r;
}

template <typename Block>
void PortableRows(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkSmall;
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w.row(r));
    for (int64_t i = 0; i < n; ++i) {
      const BlockQ8_1* a = xq + i * nb;
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) sum += Dot(row[b], a[b]);
      y[i * ldy + r] = sum;
    }
  }
}

#if defined(__AVX2__)
// int32 lanes += sums of 4 u8 x s8 products. AVX2 goes through int16 pairs (maddubs
// saturates above 32767: callers keep u8 <= 127, and |s8| <= 127 for quantized activations).
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 32 4-bit fields of 16 bytes as u8: low nibbles to bytes 0-15, high to 16-31.
inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

// Bit k of the 32-bit qh -> 0x10 in byte k (ggml's bytes_from_bits_32, masked).
inline __m256i HighBits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

// A weight block decoded once for every activation row: u8 values (or, for IQ4_NL,
// |v| and the signs to give the activations), the integer offset per unit of sum(q_x), d and
// min.
struct Decoded {
  __m256i u;
  __m256i sign;  // IQ4_NL: the table values, whose signs move onto the activations
  int offset;
  float d, m;
};

// AVX2: the tables whose values + kAvx2Bias stay small enough for maddubs (2 x 24 x 127 fits
// int16): MXFP4 (|v| <= 12). The biased values are plain u8 like Q4_0's nibbles, with the
// offset -12 x sum(q_x) as one int32 term, which saves the two sign ops per block the signed
// tables need (IQ4_NL's values reach -127: biased they would saturate).
template <typename Block>
constexpr bool kAvx2Biased = std::is_same_v<Block, BlockMXFP4>;
constexpr int kAvx2Bias = 12;
template <typename Block>
constexpr bool kAvx2Signed = kTable<Block> && !kAvx2Biased<Block>;

template <typename Block>
inline Decoded Decode(const Block& b) {
  Decoded k{};
  k.d = Scale(b);
  if constexpr (kAvx2Biased<Block>) {
    alignas(16) static constexpr auto kBiased = [] {
      std::array<uint8_t, 16> t{};
      for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kMxfp4Values[i] + kAvx2Bias);
      return t;
    }();
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.data())));
    k.u = _mm256_shuffle_epi8(table, Nibbles(b.qs));
    k.offset = -kAvx2Bias;
  } else if constexpr (kTable<Block>) {
    const int8_t* values = std::is_same_v<Block, BlockIQ4_NL> ? kIq4nlValues : kMxfp4Values;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    k.sign = _mm256_shuffle_epi8(table, Nibbles(b.qs));
    k.u = _mm256_sign_epi8(k.sign, k.sign);
  } else if constexpr (std::is_same_v<Block, BlockQ4_0> || std::is_same_v<Block, BlockQ4_1>) {
    k.u = Nibbles(b.qs);
  } else {
    k.u = _mm256_or_si256(Nibbles(b.qs), HighBits(b.qh));
  }
  if constexpr (std::is_same_v<Block, BlockQ4_0>) k.offset = -8;
  if constexpr (std::is_same_v<Block, BlockQ5_0>) k.offset = -16;
  if constexpr (kHasMin<Block>) k.m = half::F16ToF32(b.m);
  return k;
}

// Weight row `row` against activation rows [0, MR) of xq (row stride nb blocks).
template <typename Block, int MR>
inline void RowTile(const Block* row, int64_t nb, const BlockQ8_1* xq, float* y, int64_t ldy) {
  __m256 acc[MR];
  float mins[MR];
  for (int i = 0; i < MR; ++i) {
    acc[i] = _mm256_setzero_ps();
    mins[i] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const Decoded k = Decode(row[b]);
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      const BlockQ8_1& a = xq[i * nb + b];
      __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      if constexpr (kAvx2Signed<Block>) x = _mm256_sign_epi8(x, k.sign);
      __m256i s = _mm256_setzero_si256();
      if constexpr (!kAvx2Signed<Block> && !kHasMin<Block>) {
        s = _mm256_setr_epi32(k.offset * a.sum, 0, 0, 0, 0, 0, 0, 0);
      }
      s = DotU8S8(s, k.u, x);
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(k.d * a.d), _mm256_cvtepi32_ps(s), acc[i]);
      if constexpr (kHasMin<Block>) mins[i] += k.m * a.s;
    }
  }
  for (int i = 0; i < MR; ++i) y[i * ldy] = HSum(acc[i]) + mins[i];
}

template <typename Block>
void SimdRows(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
              int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkSmall;
  for (int64_t r = r0; r < r1; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w.row(r));
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) RowTile<Block, 4>(row, nb, xq + i * nb, y + i * ldy + r, ldy);
    switch (n - i) {
      case 3:
        RowTile<Block, 3>(row, nb, xq + i * nb, y + i * ldy + r, ldy);
        break;
      case 2:
        RowTile<Block, 2>(row, nb, xq + i * nb, y + i * ldy + r, ldy);
        break;
      case 1:
        RowTile<Block, 1>(row, nb, xq + i * nb, y + i * ldy + r, ldy);
        break;
      default:
        break;
    }
  }
}
#endif  // __AVX2__

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define TG_SMALL_512 1
// ---- AVX-512 VNNI: tiles of up to 8 weight rows x up to 4 activation rows -------------------
//
// Two blocks per zmm, as engine/ops/q8_0_gemv.cc's VNNI tile: one weight row's pair of blocks
// is decoded once into u8 values (bytes [lo(b) | lo(b+1) | hi(b) | hi(b+1)], 16 values each:
// the low nibbles are values 0-15 of a block, the high ones 16-31) and used by every
// activation row of the tile; VPDPBUSD gives exact int32 sums per 4 values, starting from the
// block's offset term (offset x the 4 activations' sum), so the hot loop pays no correction.
// Why tiles: one row at a time ran at 25-50% of the read bandwidth (a 768-wide Q4_0 row is 7
// cache lines, too short a stream); a tile reads NR rows' blocks per step, and the next tile
// is prefetched in software, each step as many bytes ahead as it consumes.
//
// The activations are repacked in the same byte order (PackedActivations, quant_dot_small.h),
// zero-padded to an even block count (zeros contribute exactly 0 whatever the weight byte).

// Q4_0 runs in column lanes at these levels (quant_columns.h); the tiles serve the rest.
template <typename Block>
constexpr bool kTiles512 = !std::is_same_v<Block, BlockQ4_0>;

// The integer offset of every weight value of the format (IQ4_NL, MXFP4: their tables are
// stored + 128).
template <typename Block>
constexpr int kOffset512 = std::is_same_v<Block, BlockQ5_0> ? -16
                           : kTable<Block>                  ? -128
                                                            : 0;

void PackSmall(const BlockQ8_1* xq, int64_t n, int64_t nb, int offset, PackedActivations* a) {
  a->nbp = (nb + 1) & ~int64_t{1};
  const size_t lanes = static_cast<size_t>(n * a->nbp * 8);
  // Every lane is written below (no zero fill first: it doubled the stores).
  a->q.resize(lanes * 4);
  a->d.resize(lanes);
  a->s.resize(lanes);
  a->c.resize(lanes);
  // offset x (sum of 4 q_x) = -(|offset| as u8 x q_x, VPDPBUSD): offset is 0, -16 or -128,
  // so |offset| fits the unsigned operand (128 as the byte 0x80).
  const __m128i magnitude = _mm_set1_epi8(static_cast<char>(-offset));
  const __m128i zero = _mm_setzero_si128();
  auto store = [&](int64_t lane0, __m128i q, float d, __m128i c, float s) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a->q.data() + lane0 * 4), q);
    _mm_storeu_ps(a->d.data() + lane0, _mm_set1_ps(d));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a->c.data() + lane0), c);
    _mm_storeu_ps(a->s.data() + lane0, _mm_setr_ps(s, 0.0f, 0.0f, 0.0f));
  };
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < a->nbp; ++b) {
      const int64_t pair = i * a->nbp / 2 + b / 2, half = b % 2;
      for (int part = 0; part < 2; ++part) {  // values 16 * part .. + 15 of the block
        const int64_t lane0 = pair * 16 + 8 * part + 4 * half;
        if (b == nb) {  // the padding block of an odd count
          store(lane0, zero, 0.0f, zero, 0.0f);
          continue;
        }
        const BlockQ8_1& blk = xq[i * nb + b];
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * part));
        store(lane0, v, blk.d, _mm_sub_epi32(zero, _mm_dpbusd_epi32(zero, magnitude, v)),
              part == 0 ? blk.s : 0.0f);
      }
    }
  }
}

// Lane l of a pair's scale vector takes block (l / 4) % 2's value.
alignas(64) constexpr int32_t kPairLanes[16] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};

// One weight row's blocks b0 and b1 (b1 null past the row's end: zero values and scales).
struct Pair512 {
  __m512i u;  // u8 values in the byte order above
  __m512 d;   // F32 d_w per lane
  __m512 m;   // F32 m_w per lane (Q4_1 / Q5_1)
};

template <typename Block>
inline Pair512 DecodePair(const Block* b0, const Block* b1) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0->qs));
  const __m128i q1 =
      b1 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1->qs)) : _mm_setzero_si128();
  const __m256i q = _mm256_set_m128i(q1, q0);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m512i nib = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q, m4)),
                                         _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), 1);
  Pair512 p;
  if constexpr (kTable<Block>) {
    alignas(16) static constexpr auto kBiased = [] {
      const int8_t* values = std::is_same_v<Block, BlockIQ4_NL> ? kIq4nlValues : kMxfp4Values;
      std::array<uint8_t, 16> t{};
      for (int k = 0; k < 16; ++k) t[k] = static_cast<uint8_t>(values[k] + 128);
      return t;
    }();
    p.u = _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.data()))),
        nib);
  } else if constexpr (std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>) {
    uint32_t h0, h1 = 0;
    std::memcpy(&h0, b0->qh, 4);
    if (b1) std::memcpy(&h1, b1->qh, 4);
    const uint64_t bits = (h0 & 0xFFFFu) | uint64_t{h1 & 0xFFFFu} << 16 | uint64_t{h0 >> 16} << 32 |
                          uint64_t{h1 >> 16} << 48;
    p.u = _mm512_mask_add_epi8(nib, bits, nib, _mm512_set1_epi8(0x10));
  } else {
    p.u = nib;
  }
  const __m512i lanes = _mm512_load_si512(kPairLanes);
  auto per_lane = [&](uint16_t h0, uint16_t h1) {
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | uint32_t{h1} << 16)));
    return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(f));
  };
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    const __m128 f = _mm_setr_ps(Mxfp4HalfScale(b0->e), b1 ? Mxfp4HalfScale(b1->e) : 0.0f, 0, 0);
    p.d = _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(f));
  } else {
    p.d = per_lane(b0->d, b1 ? b1->d : uint16_t{0});
  }
  if constexpr (kHasMin<Block>) p.m = per_lane(b0->m, b1 ? b1->m : uint16_t{0});
  return p;
}

template <typename Block, int MR, int NR>
inline void Tile512(const Block* w0, int64_t nb, const PackedActivations& a, int64_t i0, float* y,
                    int64_t ldy) {
  const int64_t ldq = a.nbp * kQkSmall, lds = a.nbp * 8;
  const int8_t* qx = a.q.data() + i0 * ldq;
  const float* dx = a.d.data() + i0 * lds;
  const float* sx = a.s.data() + i0 * lds;
  const int32_t* cx = a.c.data() + i0 * lds;
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b += 2) {
    // The next tile's bytes (rows are contiguous), as many per step as this step reads.
    const char* ahead = reinterpret_cast<const char*>(w0 + NR * nb + NR * b);
    TG_UNROLL
    for (int line = 0; line < static_cast<int>(2 * NR * sizeof(Block)); line += 64) {
      _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    Pair512 p[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const Block* row = w0 + j * nb;
      p[j] = DecodePair(row + b, b + 1 < nb ? row + b + 1 : nullptr);
    }
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_loadu_si512(qx + i * ldq + b * kQkSmall);
      const __m512 dxv = _mm512_loadu_ps(dx + i * lds + b * 8);
      const __m512i cxv = _mm512_loadu_si512(cx + i * lds + b * 8);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) {
        const __m512i isum = _mm512_dpbusd_epi32(cxv, p[j].u, xv);
        acc[i][j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(p[j].d, dxv), acc[i][j]);
        if constexpr (kHasMin<Block>) {
          acc[i][j] = _mm512_fmadd_ps(p[j].m, _mm512_loadu_ps(sx + i * lds + b * 8), acc[i][j]);
        }
      }
    }
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

// Activation rows [i0, i0 + n) of a packed call times weight rows [r0, r1); y row i0 first.
template <typename Block>
void Rows512(const WeightView& w, const PackedActivations& a, int64_t i0, int64_t n, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkSmall;
  const Block* w0 = reinterpret_cast<const Block*>(w.row(0));
  simd::ForActivationRows<8, 8>(n, [&]<int MR, int NR>(int64_t i) {
    int64_t r = r0;
    for (; r + NR <= r1; r += NR)
      Tile512<Block, MR, NR>(w0 + r * nb, nb, a, i0 + i, y + i * ldy + r, ldy);
    if constexpr (NR > 4) {
      for (; r + 4 <= r1; r += 4)
        Tile512<Block, MR, 4>(w0 + r * nb, nb, a, i0 + i, y + i * ldy + r, ldy);
    }
    for (; r < r1; ++r) Tile512<Block, MR, 1>(w0 + r * nb, nb, a, i0 + i, y + i * ldy + r, ldy);
  });
}
#endif  // TG_SMALL_512

// Kernel<Block>::Run(args...) for w's block type (nothing for other types).
template <template <typename> class Kernel, typename... Args>
void Dispatch(WeightType t, Args&&... args) {
  switch (t) {
    case WeightType::kQ4_0:
      return Kernel<BlockQ4_0>::Run(args...);
    case WeightType::kQ4_1:
      return Kernel<BlockQ4_1>::Run(args...);
    case WeightType::kQ5_0:
      return Kernel<BlockQ5_0>::Run(args...);
    case WeightType::kQ5_1:
      return Kernel<BlockQ5_1>::Run(args...);
    case WeightType::kIQ4_NL:
      return Kernel<BlockIQ4_NL>::Run(args...);
    case WeightType::kMXFP4:
      return Kernel<BlockMXFP4>::Run(args...);
    default:
      return;
  }
}

template <typename Block>
struct PortableKernel {
  static void Run(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
    PortableRows<Block>(w, xq, n, y, ldy, r0, r1);
  }
};

#if defined(__AVX2__)
template <typename Block>
struct SimdKernel {
  static void Run(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
#if defined(TG_SMALL_512)
    if constexpr (kTiles512<Block>) {
      thread_local PackedActivations a;
      PackSmall(xq, n, w.in / kQkSmall, kOffset512<Block>, &a);
      Rows512<Block>(w, a, 0, n, y, ldy, r0, r1);
    } else {
      GemvQ4_0Columns(w, xq, n, y, ldy, r0, r1);
    }
#else
    SimdRows<Block>(w, xq, n, y, ldy, r0, r1);
#endif
  }
};
#endif

#if defined(TG_SMALL_512)
template <typename Block>
struct PackKernel {
  static void Run(const BlockQ8_1* xq, int64_t n, int64_t nb, PackedActivations* packed) {
    if constexpr (kTiles512<Block>) PackSmall(xq, n, nb, kOffset512<Block>, packed);
  }
};

template <typename Block>
struct PackedKernel {
  static void Run(const WeightView& w, const PackedActivations& a, int64_t i0, int64_t n, float* y,
                  int64_t ldy, int64_t r0, int64_t r1) {
    if constexpr (kTiles512<Block>) Rows512<Block>(w, a, i0, n, y, ldy, r0, r1);
  }
};

// One block of 32 as portable::QuantizeActivationsQ8_1, bit for bit: the same F32 d, id and
// products, round-to-nearest-even, and the F16 rounding of d and d * sum.
void QuantizeBlockQ8_1(const float* v, BlockQ8_1* out) {
  const __m512 x0 = _mm512_loadu_ps(v), x1 = _mm512_loadu_ps(v + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(x0, id), kNearest));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(x1, id), kNearest));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs + 16), _mm512_cvtepi32_epi8(q1));
  const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  out->d = half::F16ToF32(half::F32ToF16(d));
  out->s = half::F16ToF32(half::F32ToF16(d * static_cast<float>(sum)));
  out->sum = sum;
}
#endif

}  // namespace

void QuantizeActivationsQ8_1(const float* x, int64_t n, int64_t in, BlockQ8_1* xq) {
#if defined(TG_SMALL_512)
  for (int64_t b = 0; b < n * (in / kQkSmall); ++b) QuantizeBlockQ8_1(x + b * kQkSmall, xq + b);
#else
  portable::QuantizeActivationsQ8_1(x, n, in, xq);
#endif
}

namespace portable {
void QuantizeActivationsQ8_1(const float* x, int64_t n, int64_t in, BlockQ8_1* xq) {
  const int64_t nb = in / kQkSmall;
  for (int64_t i = 0; i < n * nb; ++i) {
    const float* v = x + i * kQkSmall;
    BlockQ8_1& out = xq[i];
    float amax = 0.0f;
    for (int k = 0; k < kQkSmall; ++k) amax = std::fmax(amax, std::fabs(v[k]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int k = 0; k < kQkSmall; ++k) {
      // |v * id| <= 127, so no clamping; nearbyint rounds ties to even (vroundps nearest).
      const int q = static_cast<int>(std::nearbyint(v[k] * id));
      out.qs[k] = static_cast<int8_t>(q);
      sum += q;
    }
    out.d = half::F16ToF32(half::F32ToF16(d));
    out.s = half::F16ToF32(half::F32ToF16(d * static_cast<float>(sum)));
    out.sum = sum;
  }
}

void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
  Dispatch<PortableKernel>(w.type, w, xq, n, y, ldy, r0, r1);
}
}  // namespace portable

void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
#if defined(__AVX2__)
  Dispatch<SimdKernel>(w.type, w, xq, n, y, ldy, r0, r1);
#else
  portable::GemvSmallQuantInt8(w, xq, n, y, ldy, r0, r1);
#endif
}

bool PackSmallQuantInt8(WeightType t, const BlockQ8_1* xq, int64_t n, int64_t nb,
                        PackedActivations* packed) {
#if defined(TG_SMALL_512)
  // Q4_0 reads the Q8_1 blocks as they are (quant_columns.h).
  if (!HasSmallQuantInt8(t) || t == WeightType::kQ4_0) return false;  // kTiles512
  Dispatch<PackKernel>(t, xq, n, nb, packed);
  return true;
#else
  (void)t, (void)xq, (void)n, (void)nb, (void)packed;
  return false;
#endif
}

void GemvSmallQuantInt8Packed(const WeightView& w, const BlockQ8_1* xq,
                              const PackedActivations* packed, int64_t i0, int64_t n, float* y,
                              int64_t ldy, int64_t r0, int64_t r1) {
#if defined(TG_SMALL_512)
  if (packed != nullptr) return Dispatch<PackedKernel>(w.type, w, *packed, i0, n, y, ldy, r0, r1);
#else
  (void)packed;
#endif
  GemvSmallQuantInt8(w, xq + i0 * (w.in / kQkSmall), n, y, ldy, r0, r1);
}

TG_ISA_END
}  // namespace textgen::ops
