#include "engine/ops/q8_0_gemv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/quant_columns.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

constexpr int64_t kBlock = kQ8_0Block;

inline const int8_t* BlockQs(const uint8_t* block) {
  return reinterpret_cast<const int8_t*>(block + 2);
}

#if defined(__AVX512F__)
// Rows [r0, r1) in tiles of NR weight rows (then 4, then 1) against MR activation rows.
// tile(r, nr_tag) computes weight rows [r, r + NR') for the NR' given by the tag's type.
template <int N>
struct RowsTag {};
template <int NR, typename Tile>
inline void ForRowTiles(int64_t r0, int64_t r1, Tile&& tile) {
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) tile(r, RowsTag<NR>{});
  if constexpr (NR > 4) {
    for (; r + 4 <= r1; r += 4) tile(r, RowsTag<4>{});
  }
  for (; r < r1; ++r) tile(r, RowsTag<1>{});
}

#endif  // __AVX512F__

#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
// ---- GemvQ8_0Exact -------------------------------------------------------------------------

// Software prefetch of the next tile of NR rows (the rows are contiguous), in address order,
// spread over this tile's steps: the step of blocks [b, b+2) prefetches as many bytes as it
// consumes (2 blocks of NR rows). Why: a tile reads NR short streams at once (a 768-wide Q8_0
// row is 13 cache lines), too short for the hardware prefetcher to follow; without this, decode
// from DRAM ran at ~40% of the machine's read bandwidth while the same kernel on L3-resident
// weights reached ~22 GB/s per thread.
template <int NR>
[[gnu::always_inline]] inline void PrefetchNextTile(const uint8_t* w0, size_t row_bytes,
                                                    int64_t b) {
  const char* ahead = reinterpret_cast<const char*>(w0 + NR * row_bytes) + b * NR * kQ8_0BlockBytes;
  TG_UNROLL
  for (int line = 0; line < static_cast<int>(2 * NR * kQ8_0BlockBytes); line += 64) {
    _mm_prefetch(ahead + line, _MM_HINT_T0);
  }
}
#endif

#if defined(__AVX512F__)

// y[i, j] for MR activation rows and NR consecutive weight rows starting at `w0`. Per block,
// each weight row's 32 values are dequantized once (F32(d) * q, exact in F32: 11 x 8 bits)
// into two zmm and used by all MR rows of x; MR * NR accumulators hide the FMA latency.
template <int MR, int NR>
inline void ExactTile(const uint8_t* w0, size_t row_bytes, int64_t nb, const float* x, int64_t ldx,
                      float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 1) == 0) PrefetchNextTile<NR>(w0, row_bytes, b);
    // The x vectors first, then one weight row at a time: 2 * MR + 2 live vectors besides
    // the accumulators, so even 1 x 8 tiles stay in registers.
    __m512 x0[MR], x1[MR];
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      x0[i] = _mm512_loadu_ps(x + i * ldx + b * kBlock);
      x1[i] = _mm512_loadu_ps(x + i * ldx + b * kBlock + 16);
    }
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const uint8_t* p = w0 + j * row_bytes + b * kQ8_0BlockBytes;
      const __m512 d = _mm512_set1_ps(half::F16ToF32(half::LoadU16(p)));
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18));
      const __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
      const __m512 hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
      TG_UNROLL
      for (int i = 0; i < MR; ++i) {
        acc[i][j] = _mm512_fmadd_ps(x0[i], lo, acc[i][j]);
        acc[i][j] = _mm512_fmadd_ps(x1[i], hi, acc[i][j]);
      }
    }
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

template <int MR, int NR>
void ExactRows(const WeightView& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const size_t rb = w.row_bytes();
  const int64_t nb = w.in / kBlock;
  ForRowTiles<NR>(r0, r1, [&]<int N>(int64_t r, RowsTag<N>) {
    ExactTile<MR, N>(w.row(r), rb, nb, x, w.in, y + r, ldy);
  });
}

// ---- QuantizeActivationsQ8_0 ---------------------------------------------------------------

// roundf semantics (halfway cases away from zero) for 16 floats: |t| - floor(|t|) is exact,
// so comparing it with 0.5 decides the rounding without the double rounding of t + 0.5.
inline __m512 RoundHalfAway(__m512 t) {
  const __m512 a = _mm512_abs_ps(t);
  __m512 f = _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(a, f), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  f = _mm512_mask_add_ps(f, up, f, _mm512_set1_ps(1.0f));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(t), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(f), sign));
}

void QuantizeBlock(const float* v, BlockQ8_0* out) {
  const __m512 v0 = _mm512_loadu_ps(v);
  const __m512 v1 = _mm512_loadu_ps(v + 16);
  // vmaxps(acc, v) = acc > v ? acc : v, ggml's MAX(amax, fabsf(v)) lane by lane.
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out->d = half::F32ToF16(d);
  const __m512 vid = _mm512_set1_ps(id);
  const __m128i q0 =
      _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v0, vid))));
  const __m128i q1 =
      _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v1, vid))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs), q0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs + 16), q1);
}
#endif  // __AVX512F__

#if defined(TG_KQUANT_512)
#define TG_Q8_0_VNNI 1

// ---- GemvQ8_0Vnni --------------------------------------------------------------------------
//
// At the AVX-512 VNNI levels in column lanes (engine/ops/quant_columns.h): 16 weight rows per
// zmm, q_w + 128 as u8 against 4 activation bytes broadcast per VPDPBUSD, each block's exact
// integer sum scaled once per row (ggml's formula per block). Before, tiles of weight rows held
// two blocks of one row per zmm and paid a conversion, a multiply and an FMA per VPDPBUSD.
//
// The per-call preparation (PackQ8_0Vnni): per activation block F32(d_x) and -128 * sum(q_x),
// in packed->d and packed->c ([rows, nb] each).
void PackActivations(const BlockQ8_0* xq, int64_t n, int64_t nb, PackedActivations* a) {
  a->nbp = nb;
  a->q.clear();
  a->s.clear();
  a->d.resize(static_cast<size_t>(n * nb));
  a->c.resize(static_cast<size_t>(n * nb));
  PrepareQ8_0Columns(xq, n * nb, a->d.data(), a->c.data());
}
#endif  // VNNI

#if defined(TG_SIMD_AVX2)
// ---- AVX2 (x86-64-v3) kernels --------------------------------------------------------------
//
// Tiles of MR activation rows x NR weight rows in the shapes of simd::ForActivationRows8 (16
// ymm registers), rows split as simd::ForRowTiles8, with the AVX-512 kernels' arithmetic.

// GemvQ8_0Exact: per block and weight row, the 32 values are dequantized as F32(d) * q (exact)
// 8 at a time and used by all MR rows of x.
template <int MR, int NR>
inline void ExactTile8(const uint8_t* w0, size_t row_bytes, int64_t nb, const float* x, int64_t ldx,
                       float* y, int64_t ldy) {
  __m256 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 1) == 0) PrefetchNextTile<NR>(w0, row_bytes, b);
    const float* xb = x + b * kBlock;
    TG_UNROLL
    for (int j = 0; j < NR; ++j) {
      const uint8_t* p = w0 + j * row_bytes + b * kQ8_0BlockBytes;
      const __m256 d = _mm256_set1_ps(half::F16ToF32(half::LoadU16(p)));
      TG_UNROLL
      for (int s = 0; s < 4; ++s) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * s));
        const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
        TG_UNROLL
        for (int i = 0; i < MR; ++i) {
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + i * ldx + 8 * s), wv, acc[i][j]);
        }
      }
    }
  }
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

// roundf semantics for 8 floats, as the AVX-512 RoundHalfAway.
inline __m256 RoundHalfAway8(__m256 t) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign_bit, t);
  __m256 f = _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(a, f), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  f = _mm256_add_ps(f, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  return _mm256_or_ps(f, _mm256_and_ps(t, sign_bit));
}

void QuantizeBlock8(const float* v, BlockQ8_0* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vs[4];
  __m256 amax = _mm256_setzero_ps();
  TG_UNROLL
  for (int s = 0; s < 4; ++s) {
    vs[s] = _mm256_loadu_ps(v + 8 * s);
    amax = _mm256_max_ps(amax, _mm256_and_ps(vs[s], abs_mask));
  }
  const float d = simd::ReduceMax(amax) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out->d = half::F32ToF16(d);
  const __m256 vid = _mm256_set1_ps(id);
  __m256i qi[4];
  TG_UNROLL
  for (int s = 0; s < 4; ++s) qi[s] = _mm256_cvtps_epi32(RoundHalfAway8(_mm256_mul_ps(vs[s], vid)));
  // The packs work per 128-bit lane, leaving the groups of 4 values in the order 0 2 4 6 1 3 5 7.
  const __m256i q16a = _mm256_packs_epi32(qi[0], qi[1]);
  const __m256i q16b = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i q8 = _mm256_packs_epi16(q16a, q16b);
  const __m256i ordered =
      _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->qs), ordered);
}

#endif  // TG_SIMD_AVX2

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(TG_Q8_0_VNNI)
#define TG_Q8_0_COLUMNS8 1
// ---- GemvQ8_0Vnni below the VNNI levels (avx2, avx512) -------------------------------------
//
// The column lanes' arithmetic (quant_columns.h) in 256-bit registers: each weight row's
// result is acc = fma(F32(sumi_b), F32(d_w) * F32(d_x), acc) over its blocks b in order, with
// sumi_b the block's exact integer dot product. The one order of every level, so a request
// gives the same bytes whichever level runs it (portable::GemvQ8_0Vnni states it in scalars).
// Here 8 weight rows share one ymm of accumulators, one row per lane: per block, each row's
// 32 products go to 8 int32 lanes (exact), and a horizontal-add tree folds 8 rows' vectors
// into one vector of 8 block sums (exact), so the F32 step is one conversion and one FMA per 8
// rows. Before (2026-11-28), an F32 step per row and block and lane-wise F32 sums reduced at
// the end: another order than the VNNI levels', and more instructions per block.
//
// Why not llama.cpp's sign trick (|q_w| as u8 times q_x with q_w's sign, maddubs): it is wrong
// for q_x = -128 under a negative q_w, and the contract allows any int8. The activations are
// widened to int16 once per call and each weight vector as it is loaded; _mm256_madd_epi16
// then gives exact int32 sums of 2 products. Layout per call: q [n, nb * 32] int16, d [n, nb].
struct Int16Activations {
  std::vector<int16_t> q;
  std::vector<float> d;
};

void WidenActivations(const BlockQ8_0* xq, int64_t n, int64_t nb, Int16Activations* a) {
  a->q.resize(static_cast<size_t>(n * nb * kBlock));
  a->d.resize(static_cast<size_t>(n * nb));
  for (int64_t b = 0; b < n * nb; ++b) {
    int16_t* q = a->q.data() + b * kBlock;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[b].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                        _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16),
                        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
    a->d[b] = half::F16ToF32(xq[b].d);
  }
}

constexpr int kLanes8 = 8;  // weight rows per panel: one per F32 lane of a ymm

// 8 int32 lanes of the products of one Q8_0 block at p (d, then 32 int8) with the widened
// activations q (32 int16): exact.
[[gnu::always_inline]] inline __m256i BlockProducts(const uint8_t* p, const int16_t* q) {
  const __m256i w_lo =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
  const __m256i w_hi =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18)));
  return _mm256_add_epi32(
      _mm256_madd_epi16(w_lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
      _mm256_madd_epi16(w_hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16))));
}

// Lanes [s(a), s(b), s(c), s(d) | ...] of the 4 rows' partial vectors folded to 4 lanes per
// 128-bit half (exact int32 sums): hadd(hadd(a, b), hadd(c, d)).
[[gnu::always_inline]] inline __m256i Fold4(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}

// Rows [0, 8) of the panel at rows[] (a short panel repeats its first row; those lanes are not
// stored) times activation rows [0, MR) of a (from row i0): y[i * ldy + k] for lanes k in
// `store` (count of valid rows).
template <int MR>
void Q8_0Panel8(const uint8_t* const (&rows)[kLanes8], const uint8_t* next_panel, int64_t nb,
                const Int16Activations& a, int64_t i0, float* y, int64_t ldy, int count) {
  const int64_t ldq = nb * kBlock;
  const int16_t* qx = a.q.data() + i0 * ldq;
  const float* dx = a.d.data() + i0 * nb;
  __m256 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    // The next panel (contiguous rows), swept as fast as this one is read. Measured on the AMD
    // EPYC AVX2 VM (TinyLlama Q8_0 decode, 2 threads, 3 rounds alternated): 14.2-14.8 tok/s,
    // against 11.7-12.2 prefetching each row 8 blocks ahead and 10.9-12.0 without prefetch.
    const char* ahead = reinterpret_cast<const char*>(next_panel) + b * kLanes8 * kQ8_0BlockBytes;
    TG_UNROLL
    for (int line = 0; line < static_cast<int>(kLanes8 * kQ8_0BlockBytes); line += 64) {
      _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    const int64_t off = b * kQ8_0BlockBytes;
    __m128i dh = _mm_cvtsi32_si128(half::LoadU16(rows[0] + off));
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[1] + off), 1);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[2] + off), 2);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[3] + off), 3);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[4] + off), 4);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[5] + off), 5);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[6] + off), 6);
    dh = _mm_insert_epi16(dh, half::LoadU16(rows[7] + off), 7);
    const __m256 dw = _mm256_cvtph_ps(dh);
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      const int16_t* q = qx + i * ldq + b * kBlock;
      const __m256i lo = Fold4(BlockProducts(rows[0] + off, q), BlockProducts(rows[1] + off, q),
                               BlockProducts(rows[2] + off, q), BlockProducts(rows[3] + off, q));
      const __m256i hi = Fold4(BlockProducts(rows[4] + off, q), BlockProducts(rows[5] + off, q),
                               BlockProducts(rows[6] + off, q), BlockProducts(rows[7] + off, q));
      // lo = [rows 0-3 of the low halves | rows 0-3 of the high halves], hi the same for 4-7.
      const __m256i sumi = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                                            _mm256_permute2x128_si256(lo, hi, 0x31));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(dx[i * nb + b]));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), scale, acc[i]);
    }
  }
  if (count == kLanes8) {
    TG_UNROLL
    for (int i = 0; i < MR; ++i) _mm256_storeu_ps(y + i * ldy, acc[i]);
  } else {
    // Lanes [0, count) (simd::TailMask8 exists only at the avx2 level).
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    TG_UNROLL
    for (int i = 0; i < MR; ++i) _mm256_maskstore_ps(y + i * ldy, mask, acc[i]);
  }
}

// Weight rows [r0, r1) in panels of 8 times activation rows [0, n), 4 at a time.
void GemvQ8_0Columns8(const WeightView& w, const Int16Activations& a, int64_t n, float* y,
                      int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kBlock;
  for (int64_t r = r0; r < r1; r += kLanes8) {
    const int count = static_cast<int>(std::min<int64_t>(kLanes8, r1 - r));
    const uint8_t* rows[kLanes8];
    for (int k = 0; k < kLanes8; ++k) rows[k] = w.row(r + (k < count ? k : 0));
    // Past the last panel: prefetch this one again rather than past the weights' end.
    const uint8_t* next = r + 2 * kLanes8 <= w.out ? w.row(r + kLanes8) : w.row(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) Q8_0Panel8<4>(rows, next, nb, a, i, y + i * ldy + r, ldy, count);
    switch (n - i) {
      case 3:
        Q8_0Panel8<3>(rows, next, nb, a, i, y + i * ldy + r, ldy, count);
        break;
      case 2:
        Q8_0Panel8<2>(rows, next, nb, a, i, y + i * ldy + r, ldy, count);
        break;
      case 1:
        Q8_0Panel8<1>(rows, next, nb, a, i, y + i * ldy + r, ldy, count);
        break;
      default:
        break;
    }
  }
}
#endif  // TG_Q8_0_COLUMNS8

}  // namespace

// ---- Portable versions ---------------------------------------------------------------------

namespace portable {

void GemvQ8_0Exact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kBlock;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * w.in;
      // 16 partial sums as the AVX-512 kernel keeps, so long rows round alike.
      float acc[16] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * kQ8_0BlockBytes;
        const float d = half::F16ToF32(half::LoadU16(blk));
        const int8_t* q = BlockQs(blk);
        for (int k = 0; k < kBlock; ++k) {
          acc[k % 16] += xi[b * kBlock + k] * (d * static_cast<float>(q[k]));
        }
      }
      float sum = 0.0f;
      for (float a : acc) sum += a;
      y[i * ldy + r] = sum;
    }
  }
}

void QuantizeActivationsQ8_0(const float* x, int64_t n, int64_t in, BlockQ8_0* xq) {
  const int64_t nb = in / kBlock;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = x + i * in + b * kBlock;
      BlockQ8_0& out = xq[i * nb + b];
      float amax = 0.0f;
      for (int k = 0; k < kBlock; ++k) {
        const float a = std::fabs(v[k]);
        amax = amax > a ? amax : a;
      }
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      out.d = half::F32ToF16(d);
      for (int k = 0; k < kBlock; ++k) out.qs[k] = static_cast<int8_t>(std::roundf(v[k] * id));
    }
  }
}

void GemvQ8_0Vnni(const WeightView& w, const BlockQ8_0* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kBlock;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + b * kQ8_0BlockBytes;
        const BlockQ8_0& xb = xq[i * nb + b];
        const int8_t* q = BlockQs(blk);
        int32_t isum = 0;
        for (int k = 0; k < kBlock; ++k) isum += int32_t{q[k]} * int32_t{xb.qs[k]};
        // The one order of every level (an explicit FMA: the compiler contracts a * b + c
        // only where the level has FMA).
        const float scale = half::F16ToF32(half::LoadU16(blk)) * half::F16ToF32(xb.d);
        sum = std::fma(static_cast<float>(isum), scale, sum);
      }
      y[i * ldy + r] = sum;
    }
  }
}

}  // namespace portable

// ---- Dispatch ------------------------------------------------------------------------------

void GemvQ8_0Exact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                   int64_t r0, int64_t r1) {
#if defined(__AVX512F__)
  // Up to 4 rows of x per pass over the weights; a single row takes 8 weight rows per tile.
  simd::ForActivationRows<4, 8>(n, [&]<int MR, int NR>(int64_t i) {
    ExactRows<MR, NR>(w, x + i * w.in, y + i * ldy, ldy, r0, r1);
  });
#elif defined(TG_SIMD_AVX2)
  const size_t rb = w.row_bytes();
  const int64_t nb = w.in / kBlock;
  simd::ForActivationRows8(n, [&]<int MR, int NR>(int64_t i) {
    simd::ForRowTiles8<NR>(r0, r1, [&]<int N>(int64_t r) {
      ExactTile8<MR, N>(w.row(r), rb, nb, x + i * w.in, w.in, y + i * ldy + r, ldy);
    });
  });
#else
  portable::GemvQ8_0Exact(w, x, n, y, ldy, r0, r1);
#endif
}

void QuantizeActivationsQ8_0(const float* x, int64_t n, int64_t in, BlockQ8_0* xq) {
#if defined(__AVX512F__)
  const int64_t nb = in / kBlock;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t b = 0; b < nb; ++b) QuantizeBlock(x + i * in + b * kBlock, xq + i * nb + b);
  }
#elif defined(TG_SIMD_AVX2)
  const int64_t nb = in / kBlock;
  for (int64_t b = 0; b < n * nb; ++b) QuantizeBlock8(x + b * kBlock, xq + b);
#else
  portable::QuantizeActivationsQ8_0(x, n, in, xq);
#endif
}

void GemvQ8_0Vnni(const WeightView& w, const BlockQ8_0* xq, int64_t n, float* y, int64_t ldy,
                  int64_t r0, int64_t r1) {
#if defined(TG_Q8_0_VNNI)
  thread_local PackedActivations a;
  PackActivations(xq, n, w.in / kBlock, &a);
  GemvQ8_0VnniPacked(w, xq, &a, 0, n, y, ldy, r0, r1);
#elif defined(TG_Q8_0_COLUMNS8)
  thread_local Int16Activations a;
  WidenActivations(xq, n, w.in / kBlock, &a);
  GemvQ8_0Columns8(w, a, n, y, ldy, r0, r1);
#else
  portable::GemvQ8_0Vnni(w, xq, n, y, ldy, r0, r1);
#endif
}

bool PackQ8_0Vnni(const BlockQ8_0* xq, int64_t n, int64_t nb, PackedActivations* packed) {
#if defined(TG_Q8_0_VNNI)
  PackActivations(xq, n, nb, packed);
  return true;
#else
  (void)xq, (void)n, (void)nb, (void)packed;
  return false;
#endif
}

void GemvQ8_0VnniPacked(const WeightView& w, const BlockQ8_0* xq, const PackedActivations* packed,
                        int64_t i0, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
#if defined(TG_Q8_0_VNNI)
  if (packed != nullptr) {
    const int64_t nb = w.in / kBlock;
    return GemvQ8_0Columns(w, xq + i0 * nb, packed->d.data() + i0 * nb, packed->c.data() + i0 * nb,
                           n, y, ldy, r0, r1);
  }
#else
  (void)packed;
#endif
  GemvQ8_0Vnni(w, xq + i0 * (w.in / kBlock), n, y, ldy, r0, r1);
}

TG_ISA_END
}  // namespace textgen::ops
