#include "engine/ops/quant_gemv.h"

#include <cstddef>
#include <vector>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/quant_decode.h"
#include "engine/ops/quant_unpack.h"
#include "engine/ops/simd.h"

// The widened weights must round as the scalar decoders do (d * q, then - m: two roundings);
// CMake passes -ffp-contract=off for this file too, and the dot products use explicit FMAs.
#pragma GCC optimize("fp-contract=off")

namespace textgen::ops {
TG_ISA_BEGIN

namespace portable {

void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  // One widened row [w.in] (at most tens of KB: stays in L1/L2 while every x row uses it).
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(w.in));
  for (int64_t r = r0; r < r1; ++r) {
    portable::DecodeRowF32(w.type, w.row(r), row.data(), w.in);
    for (int64_t i = 0; i < n; ++i) y[i * ldy + r] = simd::Dot(x + i * w.in, row.data(), w.in);
  }
}

}  // namespace portable

#if defined(TG_QUANT_UNPACK)
namespace {

// Prefetch of the next tile of NR rows (contiguous after this tile's), as GemvQ8_0Exact does:
// a tile reads NR short streams at once, too short for the hardware prefetcher to follow. The
// step of block b fetches as many bytes of the next tile as the step consumes.
template <typename Fmt, int NR>
[[gnu::always_inline]] inline void PrefetchNextTile(const uint8_t* w0, size_t row_bytes,
                                                    int64_t b) {
  constexpr int64_t kStep = int64_t{NR} * Fmt::kBytes;
  const char* next = reinterpret_cast<const char*>(w0 + NR * row_bytes);
  const int64_t first = b * kStep / 64 * 64, end = (b + 1) * kStep;
  for (int64_t line = first; line < end; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
}

#if defined(__AVX512F__)
// y[i, j] for MR activation rows and NR weight rows from `w0`. Per block, each row's scales are
// computed once; per chunk of 16 values, the MR x vectors are loaded once and each weight row's
// 16 values widened in registers and used by all MR rows.
template <typename Fmt, int MR, int NR>
inline void ExactTile(const uint8_t* w0, size_t row_bytes, int64_t nb, const float* x, int64_t ldx,
                      float* y, int64_t ldy) {
  constexpr int kG = unpack::kGroups<Fmt>;
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchNextTile<Fmt, NR>(w0, row_bytes, b);
    const uint8_t* blk[NR];
    float a[NR][kG], m[NR][kG];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      blk[j] = w0 + j * row_bytes + b * Fmt::kBytes;
      Fmt::Scales(blk[j], a[j], m[j]);
    }
    const float* xb = x + b * Fmt::kValues;
    unpack::Unroll<Fmt::kChunks>([&](auto c) {
      __m512 xv[MR];
      TG_UNROLL
      for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_ps(xb + i * ldx + 16 * c);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) {
        const __m512 wv = unpack::Widen16<Fmt, c>(blk[j], a[j], m[j]);
        TG_UNROLL
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
      }
    });
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

template <typename Fmt, int MR, int NR>
void ExactRows(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const size_t rb = w.row_bytes();
  const int64_t nb = w.in / Fmt::kValues;
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) ExactTile<Fmt, MR, NR>(w.row(r), rb, nb, x, w.in, y + r, ldy);
  if constexpr (NR > 4) {
    for (; r + 4 <= r1; r += 4) ExactTile<Fmt, MR, 4>(w.row(r), rb, nb, x, w.in, y + r, ldy);
  }
  for (; r < r1; ++r) ExactTile<Fmt, MR, 1>(w.row(r), rb, nb, x, w.in, y + r, ldy);
}

#else   // AVX2

// The AVX2 tile: the same, 8 lanes at a time (each chunk of 16 widened as two halves), in the
// tile shapes of simd::ForActivationRows8; x is read straight from L1 by the FMAs.
template <typename Fmt, int MR, int NR>
inline void ExactTile8(const uint8_t* w0, size_t row_bytes, int64_t nb, const float* x, int64_t ldx,
                       float* y, int64_t ldy) {
  constexpr int kG = unpack::kGroups<Fmt>;
  __m256 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchNextTile<Fmt, NR>(w0, row_bytes, b);
    const uint8_t* blk[NR];
    float a[NR][kG], m[NR][kG];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      blk[j] = w0 + j * row_bytes + b * Fmt::kBytes;
      Fmt::Scales(blk[j], a[j], m[j]);
    }
    const float* xb = x + b * Fmt::kValues;
    unpack::Unroll<Fmt::kChunks>([&](auto c) {
      TG_UNROLL
      for (int j = 0; j < NR; ++j) {
        __m256 lo, hi;
        unpack::Widen8x2<Fmt, c>(blk[j], a[j], m[j], &lo, &hi);
        TG_UNROLL
        for (int i = 0; i < MR; ++i) {
          const float* xi = xb + i * ldx + 16 * c;
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(xi), lo, acc[i][j]);
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(xi + 8), hi, acc[i][j]);
        }
      }
    });
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}
#endif  // __AVX512F__

}  // namespace

void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  const bool known = unpack::Visit(w.type, [&]<typename Fmt>(Fmt) {
#if defined(__AVX512F__)
    // Up to 4 rows of x per pass over the weights; a single row takes 8 weight rows per tile.
    simd::ForActivationRows<4, 8>(n, [&]<int MR, int NR>(int64_t i) {
      ExactRows<Fmt, MR, NR>(w, x + i * w.in, y + i * ldy, ldy, r0, r1);
    });
#else
    const size_t rb = w.row_bytes();
    const int64_t nb = w.in / Fmt::kValues;
    simd::ForActivationRows8(n, [&]<int MR, int NR>(int64_t i) {
      simd::ForRowTiles8<NR>(r0, r1, [&]<int N>(int64_t r) {
        ExactTile8<Fmt, MR, N>(w.row(r), rb, nb, x + i * w.in, w.in, y + i * ldy + r, ldy);
      });
    });
#endif
  });
  if (!known) portable::GemvQuantExact(w, x, n, y, ldy, r0, r1);
}
#else
void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  portable::GemvQuantExact(w, x, n, y, ldy, r0, r1);
}
#endif  // TG_QUANT_UNPACK

TG_ISA_END
}  // namespace textgen::ops
