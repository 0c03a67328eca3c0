#include "engine/ops/gemv_float.h"

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

// As the AVX-512 Tile, 8 lanes wide: MR * NR ymm accumulators, the MR x vectors of a step
// loaded once, and each weight vector widened once and used by all MR rows.
template <typename L, int MR, int NR>
inline void Tile(const typename L::T* w, int64_t in, const float* x, float* y, int64_t ldy) {
  __m256 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= in; k += 8) {
    // F32 rows (twice as long) did worse with it: 17-22 instead of 24-29 tokens/s.
    if constexpr (sizeof(typename L::T) == 2) PrefetchNextTile<typename L::T, NR>(w, in, k);
    __m256 xv[MR];
    TG_UNROLL
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x + i * in + k);
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = L::Full(w + j * in + k);
      TG_UNROLL
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  if (k < in) {
    const __m256i m = simd::TailMask8(in - k);
    __m256 xv[MR];
    TG_UNROLL
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_maskload_ps(x + i * in + k, m);
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = L::Tail(w + j * in + k, in - k);
      TG_UNROLL
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

template <typename L>
void Gemv(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
          int64_t r1) {
  const auto* base = static_cast<const typename L::T*>(w.data);
  const int64_t in = w.in;
  simd::ForActivationRows8(n, [&]<int MR, int NR>(int64_t i) {
    simd::ForRowTiles8<NR>(r0, r1, [&]<int N>(int64_t r) {
      Tile<L, MR, N>(base + r * in, in, x + i * in, y + i * ldy + r, ldy);
    });
  });
}
#endif  // __AVX512F__

// Portable: 16 partial sums per dot product, as the vector kernels keep.
template <typename Widen>
void PortableGemv(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy, int64_t r0,
                  int64_t r1, Widen widen) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * w.in;
      float acc[16] = {};
      for (int64_t k = 0; k < w.in; ++k) acc[k % 16] += xi[k] * widen(row, k);
      float sum = 0.0f;
      for (float a : acc) sum += a;
      y[i * ldy + r] = sum;
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
