#include "engine/ops/direct_matmul.h"

#include <algorithm>

#include "engine/ops/gemv_float.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

#if defined(__AVX512F__)
// y[r, j] for r < MR rows of x and j < NR rows of W: MR*NR zmm accumulators, so each loaded
// vector of W is reused MR times and each vector of x NR times. NR is 1 or a multiple of 4.
template <int MR, int NR>
inline void Tile(const float* x, int64_t ldx, const float* w, int64_t in, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int r = 0; r < MR; ++r) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    __m512 wv[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_ps(w + j * in + k);
    TG_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x + r * ldx + k);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  if (k < in) {
    const __mmask16 m = simd::TailMask(in - k);
    __m512 wv[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(m, w + j * in + k);
    TG_UNROLL
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * ldx + k);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  TG_UNROLL
  for (int r = 0; r < MR; ++r) {
    if constexpr (NR == 1) {
      y[r * ldy] = simd::Reduce1(acc[r][0]);
    } else {
      TG_UNROLL
      for (int j = 0; j < NR; j += 4) _mm_storeu_ps(y + r * ldy + j, simd::Reduce4(&acc[r][j]));
    }
  }
}

// All `out` rows of W against MR rows of x: NR-wide tiles, then single rows for the rest.
template <int MR, int NR>
void Rows(const float* w, int64_t out, int64_t in, const float* x, float* y, int64_t ldy) {
  int64_t j = 0;
  for (; j + NR <= out; j += NR) Tile<MR, NR>(x, in, w + j * in, in, y + j, ldy);
  if constexpr (NR > 4) {
    for (; j + 4 <= out; j += 4) Tile<MR, 4>(x, in, w + j * in, in, y + j, ldy);
  }
  for (; j < out; ++j) Tile<MR, 1>(x, in, w + j * in, in, y + j, ldy);
}
#endif

}  // namespace

void DirectMatmulF32(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y) {
  DirectMatmulF32Strided(w, out, in, x, n, y, out);
}

void DirectMatmulF32Strided(const float* w, int64_t out, int64_t in, const float* x, int64_t n,
                            float* y, int64_t ldy) {
#if defined(__AVX512F__)
  // Many rows (prefill): 6 rows of x per tile, so each loaded W vector (from L2) feeds 6 FMAs
  // instead of 4 (measured: the 4-row tiles ran at ~0.7x oneDNN's sgemm at 64-128 rows). Every
  // dot product keeps its FMA sequence and reduction, so the result is the same bit for bit.
  int64_t r0 = 0;
  if (n >= 6) {
    for (; r0 + 6 <= n; r0 += 6) Rows<6, 4>(w, out, in, x + r0 * in, y + r0 * ldy, ldy);
  }
  // Up to 4 rows of x at a time; with fewer, 8 rows of W per tile (8 FMA chains).
  simd::ForActivationRows<8, 8>(n - r0, [&]<int MR, int NR>(int64_t r) {
    Rows<MR, NR>(w, out, in, x + (r0 + r) * in, y + (r0 + r) * ldy, ldy);
  });
#elif defined(TG_SIMD_AVX2)
  // The AVX2 F32 kernel is GemvF32's (8-lane tiles sized for 16 ymm registers).
  GemvF32(WeightView{WeightType::kF32, w, out, in}, x, n, y, ldy, 0, out);
#else
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < out; ++j) y[r * ldy + j] = simd::Dot(x + r * in, w + j * in, in);
  }
#endif
}

TG_ISA_END
}  // namespace textgen::ops
