#include "engine/ops/gemv_float.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

#if defined(__AVX512F__)
// Widen 16 weights (or the first `m` lanes, the rest zero) to F32.
struct LoadF32 {
  using T = float;
  static __m512 Full(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 Masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LoadF16 {
  using T = uint16_t;
  static __m512 Full(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 Masked(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
// BF16 is the upper half of an F32: zero-extend each 16-bit value and shift it up.
struct LoadBf16 {
  using T = uint16_t;
  static __m512 Full(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Masked(const uint16_t* p, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

// y[i, j] for MR rows of x and NR consecutive weight rows from `w` (row stride `in`): MR * NR
// zmm accumulators, each weight vector converted once and reused MR times.
template <typename L, int MR, int NR>
inline void Tile(const typename L::T* w, int64_t in, const float* x, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  auto step = [&](const __m512(&wv)[NR], int64_t k, __mmask16 m) {
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + i * in + k);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  };
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    __m512 wv[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) wv[j] = L::Full(w + j * in + k);
    step(wv, k, 0xFFFF);
  }
  if (k < in) {
    const __mmask16 m = simd::TailMask(in - k);
    __m512 wv[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) wv[j] = L::Masked(w + j * in + k, m);
    step(wv, k, m);
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

// Weight rows [r0, r1) against MR rows of x: NR-wide tiles, then 4, then single rows.
template <typename L, int MR, int NR>
void Rows(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const auto* base = static_cast<const typename L::T*>(w.data);
  const int64_t in = w.in;
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) Tile<L, MR, NR>(base + r * in, in, x, y + r, ldy);
  if constexpr (NR > 4) {
    for (; r + 4 <= r1; r += 4) Tile<L, MR, 4>(base + r * in, in, x, y + r, ldy);
  }
  for (; r < r1; ++r) Tile<L, MR, 1>(base + r * in, in, x, y + r, ldy);
}

template <typename L>
void Gemv(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
          int64_t r1) {
  // As DirectMatmulF32: with fewer than 4 rows of x, 8 weight rows per tile.
  simd::ForActivationRows<8, 8>(n, [&]<int MR, int NR>(int64_t i) {
    Rows<L, MR, NR>(w, x + i * w.in, y + i * ldy, ldy, r0, r1);
  });
}
#elif defined(TG_SIMD_AVX2)
// The AVX2 forms of the loaders: 8 weights widened to F32, or the first `m` (the rest zero,
// nothing past them read).
struct LoadF32 {
  using T = float;
  static __m256 Full(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 Tail(const float* p, int64_t m) {
    return _mm256_maskload_ps(p, simd::TailMask8(m));
  }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 Full(const uint16_t* p) { return simd::LoadF16(p); }
  static __m256 Tail(const uint16_t* p, int64_t m) {
    return _mm256_cvtph_ps(simd::LoadU16Tail(p, m));
  }
};
struct LoadBf16 {
  using T = uint16_t;
  static __m256 Full(const uint16_t* p) { return simd::LoadBf16(p); }
  static __m256 Tail(const uint16_t* p, int64_t m) {
    return simd::WidenBf16(simd::LoadU16Tail(p, m));
  }
};

// Software prefetch of the next tile's NR rows (contiguous after this tile's), spread over this
// tile's steps: step k prefetches as many bytes of the next tile as it consumes of this one.
// Why: a tile reads NR short streams at once (a 768-wide BF16 row is 24 cache lines), too short
// for the hardware prefetcher to follow. Measured on stories110M BF16 decode, one thread of a
// shared machine: ~28-35 tokens/s without (stalled on the loads), ~40-46 with.
template <typename T, int NR>
[[gnu::always_inline]] inline void PrefetchNextTile(const T* w, int64_t in, int64_t k) {
  constexpr int64_t kStepBytes = 8 * NR * static_cast<int64_t>(sizeof(T));
  const char* ahead = reinterpret_cast<const char*>(w + NR * in) + k * NR * sizeof(T);
  if constexpr (kStepBytes >= 64) {
    TG_UNROLL
    for (int64_t line = 0; line < kStepBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
  } else {
    if ((k / 8) % (64 / kStepBytes) == 0) _mm_prefetch(ahead, _MM_HINT_T0);
  }
}

// The 16 lanes of the AVX-512 kernels held in two ymm registers, lo (lanes 0-7) and hi
// (8-15), so that every level sums a dot product in one order (issue 32: the level a CPU runs
// changes speed, never answers): lane l accumulates the products of k = l mod 16 by FMA in k
// order, lanes past the row's end take FMAs of zeros (as the masked AVX-512 tail does), then
// Sum16's tree adds the lanes as simd::Reduce1 (AVX-512) does.

// The lane sums of lo[j] : hi[j] for j < 4, in Sum16's order: Reduce4's shuffles reduce each
// 128-bit block of lo (blocks 0, 1) and of hi (blocks 2, 3); then (b0 + b2) + (b1 + b3).
inline __m128 Sum16x4(const __m256* lo, const __m256* hi) {
  auto blocks = [](const __m256* a) {
    const __m256 c = _mm256_add_ps(_mm256_unpacklo_ps(a[0], a[1]), _mm256_unpackhi_ps(a[0], a[1]));
    const __m256 d = _mm256_add_ps(_mm256_unpacklo_ps(a[2], a[3]), _mm256_unpackhi_ps(a[2], a[3]));
    return _mm256_add_ps(_mm256_shuffle_ps(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  };
  const __m256 u = _mm256_add_ps(blocks(lo), blocks(hi));  // [b0 + b2 | b1 + b3] per vector
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

inline float Sum16(__m256 lo, __m256 hi) {
  auto blocks = [](__m256 a) {  // each 128-bit block's (x0 + x2) + (x1 + x3), in every lane
    const __m256 t = _mm256_add_ps(a, _mm256_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_add_ps(t, _mm256_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
  };
  const __m256 u = _mm256_add_ps(blocks(lo), blocks(hi));
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

// y[i * ldy + j] = Sum16(lo[i][j], hi[i][j]) for NR = 1, 2 or 4.
template <int MR, int NR>
inline void StoreSums16(const __m256 (&lo)[MR][NR], const __m256 (&hi)[MR][NR], float* y,
                        int64_t ldy) {
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    if constexpr (NR == 1) {
      y[i * ldy] = Sum16(lo[i][0], hi[i][0]);
    } else if constexpr (NR == 2) {
      const __m256 z = _mm256_setzero_ps();
      const __m256 l[4] = {lo[i][0], lo[i][1], z, z}, h[4] = {hi[i][0], hi[i][1], z, z};
      _mm_storel_pi(reinterpret_cast<__m64*>(y + i * ldy), Sum16x4(l, h));
    } else {
      static_assert(NR == 4);
      _mm_storeu_ps(y + i * ldy, Sum16x4(lo[i], hi[i]));
    }
  }
}

// MR rows of x against NR weight rows: 2 * MR * NR ymm accumulators (<= 8 for the shapes
// ForActivationRows16 takes), each weight vector widened once and used by all MR rows; the x
// vectors are read from L1 as FMA operands.
template <typename L, int MR, int NR>
inline void Tile(const typename L::T* w, int64_t in, const float* x, float* y, int64_t ldy) {
  __m256 lo[MR][NR], hi[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) lo[i][j] = hi[i][j] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    // F32 rows (twice as long) did worse with it: 17-22 instead of 24-29 tokens/s.
    if constexpr (sizeof(typename L::T) == 2) {
      PrefetchNextTile<typename L::T, NR>(w, in, k);
      PrefetchNextTile<typename L::T, NR>(w, in, k + 8);
    }
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m256 wl = L::Full(w + j * in + k), wh = L::Full(w + j * in + k + 8);
      TG_UNROLL
      for (int i = 0; i < MR; ++i) {
        lo[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * in + k), wl, lo[i][j]);
        hi[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * in + k + 8), wh, hi[i][j]);
      }
    }
  }
  if (k < in) {
    // The last 1-15 values; the lanes past them get FMAs of zeros.
    const int64_t m_lo = std::min<int64_t>(in - k, 8), m_hi = in - k - m_lo;
    const __m256i mask_lo = simd::TailMask8(m_lo), mask_hi = simd::TailMask8(m_hi);
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m256 wl = L::Tail(w + j * in + k, m_lo);
      const __m256 wh = m_hi > 0 ? L::Tail(w + j * in + k + 8, m_hi) : _mm256_setzero_ps();
      TG_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m256 xl = _mm256_maskload_ps(x + i * in + k, mask_lo);
        const __m256 xh = _mm256_maskload_ps(x + i * in + k + 8, mask_hi);
        lo[i][j] = _mm256_fmadd_ps(xl, wl, lo[i][j]);
        hi[i][j] = _mm256_fmadd_ps(xh, wh, hi[i][j]);
      }
    }
  }
  StoreSums16<MR, NR>(lo, hi, y, ldy);
}

// ForActivationRows for 16 ymm registers and two per accumulator: 4 or 3 rows of x take 1
// weight row per tile, 2 rows 2 and a single row 4 (8 independent FMA chains for decode).
template <typename Rows>
inline void ForActivationRows16(int64_t n, Rows&& rows) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) rows.template operator()<4, 1>(i);
  switch (n - i) {
    case 3:
      rows.template operator()<3, 1>(i);
      break;
    case 2:
      rows.template operator()<2, 2>(i);
      break;
    case 1:
      rows.template operator()<1, 4>(i);
      break;
    default:
      break;
  }
}

template <typename L>
void Gemv(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
          int64_t r1) {
  const auto* base = static_cast<const typename L::T*>(w.data);
  const int64_t in = w.in;
  ForActivationRows16(n, [&]<int MR, int NR>(int64_t i) {
    simd::ForRowTiles8<NR>(r0, r1, [&]<int N>(int64_t r) {
      Tile<L, MR, N>(base + r * in, in, x + i * in, y + i * ldy + r, ldy);
    });
  });
}
#endif  // __AVX512F__

// Portable: the vector kernels' order spelled out. Lane l of 16 accumulates the products of
// k = l mod 16 by FMA in k order, the lanes past the row's end an FMA of zeros (the masked tail:
// it turns a -0 sum into +0), then the lanes are added as simd::Reduce1 (AVX-512) adds them:
// per block of 4, (a0 + a2) + (a1 + a3); then (b0 + b2) + (b1 + b3).
float Sum16(const float (&a)[16]) {
  float b[4];
  for (int j = 0; j < 4; ++j) b[j] = (a[4 * j] + a[4 * j + 2]) + (a[4 * j + 1] + a[4 * j + 3]);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

template <typename Widen>
void PortableGemv(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                  int64_t r1, Widen widen) {
  const int64_t padded = (w.in + 15) / 16 * 16;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * w.in;
      float acc[16] = {};
      for (int64_t k = 0; k < w.in; ++k) acc[k % 16] = std::fma(xi[k], widen(row, k), acc[k % 16]);
      for (int64_t k = w.in; k < padded; ++k) acc[k % 16] = std::fma(0.0f, 0.0f, acc[k % 16]);
      y[i * ldy + r] = Sum16(acc);
    }
  }
}

}  // namespace

namespace portable {

void GemvF16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1) {
  PortableGemv(w, x, n, y, ldy, r0, r1, [](const uint8_t* row, int64_t k) {
    return half::F16ToF32(half::LoadU16(row + 2 * k));
  });
}

void GemvBf16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
              int64_t r1) {
  PortableGemv(w, x, n, y, ldy, r0, r1, [](const uint8_t* row, int64_t k) {
    return half::Bf16ToF32(half::LoadU16(row + 2 * k));
  });
}

void GemvF32(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1) {
  PortableGemv(w, x, n, y, ldy, r0, r1, [](const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, sizeof(v));
    return v;
  });
}

}  // namespace portable

void GemvF16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1) {
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  Gemv<LoadF16>(w, x, n, y, ldy, r0, r1);
#else
  portable::GemvF16(w, x, n, y, ldy, r0, r1);
#endif
}

void GemvBf16(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
              int64_t r1) {
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  Gemv<LoadBf16>(w, x, n, y, ldy, r0, r1);
#else
  portable::GemvBf16(w, x, n, y, ldy, r0, r1);
#endif
}

void GemvF32(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
             int64_t r1) {
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  Gemv<LoadF32>(w, x, n, y, ldy, r0, r1);
#else
  portable::GemvF32(w, x, n, y, ldy, r0, r1);
#endif
}

TG_ISA_END
}  // namespace textgen::ops
