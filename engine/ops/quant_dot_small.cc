#include "engine/ops/quant_dot_small.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "engine/ops/half.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
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

template <typename Block>
constexpr bool kHasMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;

template <typename Block>
float Dot(const Block& w, const BlockQ8_1& a) {
  int q[kQkSmall], offset;
  Values(w, q, &offset);
  int32_t sumi = offset * a.sum;
  for (int l = 0; l < kQkSmall; ++l) sumi += q[l] * a.qs[l];
  const float r = half::F16ToF32(w.d) * a.d * static_cast<float>(sumi);
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

// A weight block decoded once for every activation row: u8 values (or, for IQ4_NL, |v| and
// the signs to give the activations), the integer offset per unit of sum(q_x), d and min.
struct Decoded {
  __m256i u;
  __m256i sign;  // IQ4_NL only: the table values, whose signs move onto the activations
  int offset;
  float d, m;
};

template <typename Block>
inline Decoded Decode(const Block& b) {
  Decoded k{};
  k.d = half::F16ToF32(b.d);
  if constexpr (std::is_same_v<Block, BlockIQ4_NL>) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
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
      if constexpr (std::is_same_v<Block, BlockIQ4_NL>) x = _mm256_sign_epi8(x, k.sign);
      __m256i s = _mm256_setzero_si256();
      if constexpr (!std::is_same_v<Block, BlockIQ4_NL> && !kHasMin<Block>) {
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

template <template <typename> class Kernel>
void Dispatch(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
              int64_t r0, int64_t r1) {
  switch (w.type) {
    case WeightType::kQ4_0:
      return Kernel<BlockQ4_0>::Run(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ4_1:
      return Kernel<BlockQ4_1>::Run(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ5_0:
      return Kernel<BlockQ5_0>::Run(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ5_1:
      return Kernel<BlockQ5_1>::Run(w, xq, n, y, ldy, r0, r1);
    case WeightType::kIQ4_NL:
      return Kernel<BlockIQ4_NL>::Run(w, xq, n, y, ldy, r0, r1);
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
    SimdRows<Block>(w, xq, n, y, ldy, r0, r1);
  }
};
#endif

}  // namespace

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

namespace portable {
void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
  Dispatch<PortableKernel>(w, xq, n, y, ldy, r0, r1);
}
}  // namespace portable

void GemvSmallQuantInt8(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
#if defined(__AVX2__)
  Dispatch<SimdKernel>(w, xq, n, y, ldy, r0, r1);
#else
  portable::GemvSmallQuantInt8(w, xq, n, y, ldy, r0, r1);
#endif
}

}  // namespace textgen::ops
