#include "engine/ops/quant_columns.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "engine/ops/column_lanes.h"
#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_simd.h"

namespace textgen::ops {
TG_ISA_BEGIN

#if defined(TG_KQUANT_512)
namespace {
using namespace columns;  // NOLINT: the shared pieces of column_lanes.h

// The scales of one super-block of a 16-row panel, per lane (row).
struct alignas(64) Q4KPanelScales {
  int32_t sc[8][kLanes];  // sub-block scales, x 16 for the even (low-nibble) sub-blocks
  int32_t mn[4][kLanes];  // (mn[2k], mn[2k + 1]) as an int16 pair, for VPDPWSSD
  float d[kLanes];
  float dmin[kLanes];
};
// One super-block of a 16-row panel. qs[c][g], lane r: qs bytes 32c + 4g .. + 3 of row r, whose
// low nibbles are values 4g .. 4g + 3 of sub-block 2c and high nibbles those of sub-block 2c + 1
// (unpacked by the reader: storing them unpacked doubled the stores, which bound decode). Rows
// past the panel's end are zero throughout, so they add nothing and their lanes are never
// stored.
struct alignas(64) Q4KPanelBlock {
  uint8_t qs[4][8][64];
  Q4KPanelScales s;
};

// t[k], lane r: qs dword 16 half + k (= 8c + g) of the Q4_K block at base + r * row_bytes, for
// the rows r < rows (zero above).
template <bool kFull = false>
[[gnu::always_inline]] inline void TransposeQs(const uint8_t* base, size_t row_bytes, int rows,
                                               int half, __m512i (&t)[kLanes]) {
  __m512i v[kLanes];
  TG_UNROLL
  for (int r = 0; r < kLanes; ++r) {
    v[r] = _mm512_maskz_loadu_epi32(RowMask<kFull>(r, rows),
                                    base + r * row_bytes + offsetof(BlockQ4_K, qs) + 64 * half);
  }
  Transpose16(v, t);
}

// The scales of the Q4_K blocks at base + r * row_bytes (rows r < rows; others zero) from the
// 16-byte head of each: dword 0 = d | dmin << 16, 1-3 = u0 u1 u2, the packed 6-bit scales and
// mins (ggml's get_scale_min_k4, for 16 rows at once). The heads by in-lane transposes: a gather
// per dword cost more (decode is partly compute-bound here).
template <bool kFull>
void RepackScales(const uint8_t* base, size_t row_bytes, int rows, Q4KPanelScales* p) {
  __m512i head[4], mn[8];
  Transpose16x4<kFull>(base, row_bytes, rows, head);
  const __m512i m6 = _mm512_set1_epi32(0x3F), m4d = _mm512_set1_epi32(0x0F);
  const __m512i m2x4 = _mm512_set1_epi32(0x30);  // the top 2 bits of a 6-bit field
  TG_UNROLL
  for (int j = 0; j < 4; ++j) {
    const __m512i u0 = _mm512_srli_epi32(head[1], 8 * j), u1 = _mm512_srli_epi32(head[2], 8 * j);
    const __m512i u2 = _mm512_srli_epi32(head[3], 8 * j);
    // Sub-blocks j and j + 4 are low-nibble ones when j is even: their scale x 16 meets the
    // high nibbles' 16 (AddNibbleDots).
    const int x16 = j % 2 == 0 ? 4 : 0;
    _mm512_store_si512(p->sc[j], _mm512_slli_epi32(_mm512_and_si512(u0, m6), x16));
    _mm512_store_si512(
        p->sc[j + 4],
        _mm512_slli_epi32(_mm512_or_si512(_mm512_and_si512(u2, m4d),
                                          _mm512_and_si512(_mm512_srli_epi32(u0, 2), m2x4)),
                          x16));
    mn[j] = _mm512_and_si512(u1, m6);
    mn[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4d),
                                _mm512_and_si512(_mm512_srli_epi32(u1, 2), m2x4));
  }
  TG_UNROLL
  for (int k = 0; k < 4; ++k) {
    _mm512_store_si512(p->mn[k], _mm512_or_si512(mn[2 * k], _mm512_slli_epi32(mn[2 * k + 1], 16)));
  }
  _mm512_store_ps(p->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0])));
  _mm512_store_ps(p->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head[0], 16))));
}

// Rows [0, rows) (rows <= 16) of the Q4_K rows at w0 (row_bytes apart), all nb super-blocks, into
// out[0 .. nb): dword transposes of the rows' qs (a gather per vector measured 45% of decode
// time), in-lane transposes for the 16-byte heads.
void RepackQ4KPanel(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb, Q4KPanelBlock* out) {
  __m512i t[kLanes];
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchNextPanel<sizeof(BlockQ4_K)>(w0, row_bytes, b);
    const uint8_t* base = w0 + b * sizeof(BlockQ4_K);
    Q4KPanelBlock& p = out[b];
    TG_UNROLL
    for (int half = 0; half < 2; ++half) {
      TransposeQs(base, row_bytes, rows, half, t);
      TG_UNROLL
      for (int k = 0; k < kLanes; ++k) _mm512_store_si512(p.qs[2 * half + k / 8][k % 8], t[k]);
    }
    RepackScales<false>(base, row_bytes, rows, &p.s);
  }
}

// Adds sub-blocks 2c and 2c + 1 of super-block b (q[g], lane r: qs dword 8c + g of row r) times
// activation rows [0, MR) to sumi16 = 16 x the scaled sum: sumi16 += 16 sc[2c] * (low nibbles .
// x) + sc[2c + 1] * 16 (high nibbles . x), exact in int32 (|sumi| <= 8 * 63 * 32 * 15 * 128 <
// 2^25, so 16 sumi < 2^29).
template <int MR>
[[gnu::always_inline]] inline void AddSubBlockPair(const __m512i* q, const Q4KPanelScales& s,
                                                   const BlockQ8_K* xq, int64_t nb, int64_t b,
                                                   int c, __m512i (&sumi16)[MR]) {
  __m512i lo[MR], hi[MR];
  const int8_t* x[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    lo[i] = hi[i] = _mm512_setzero_si512();
    x[i] = xq[i * nb + b].qs + 64 * c;
  }
  AddNibbleDots<MR, 8, 32>(q, x, lo, hi);
  const __m512i sc_lo = _mm512_load_si512(s.sc[2 * c]), sc_hi = _mm512_load_si512(s.sc[2 * c + 1]);
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    sumi16[i] = _mm512_add_epi32(sumi16[i], _mm512_add_epi32(_mm512_mullo_epi32(lo[i], sc_lo),
                                                             _mm512_mullo_epi32(hi[i], sc_hi)));
  }
}

// Super-block b's F32 step: acc = fma(F32(sumi), d_w * d_x, acc) (sumi = sumi16 / 16, exact),
// then minus F32(summs) * dmin_w * d_x, summs = sum_j mn_j * bsum_j exact in int32.
template <int MR>
[[gnu::always_inline]] inline void FinishSuperBlock(const Q4KPanelScales& s, const BlockQ8_K* xq,
                                                    const int16_t* xs, int64_t nb, int64_t b,
                                                    const __m512i (&sumi16)[MR],
                                                    __m512 (&acc)[MR]) {
  const __m512 d = _mm512_load_ps(s.d), dmin = _mm512_load_ps(s.dmin);
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    const int16_t* sums = xs + (i * nb + b) * 8;
    __m512i summs = _mm512_setzero_si512();
    TG_UNROLL
    for (int k = 0; k < 4; ++k) {
      summs = _mm512_dpwssd_epi32(summs, _mm512_load_si512(s.mn[k]),
                                  _mm512_set1_epi32(Load32(sums + 2 * k)));
    }
    const __m512 dx = _mm512_set1_ps(xq[i * nb + b].d);
    const __m512i sumi = _mm512_srai_epi32(sumi16[i], 4);
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(d, dx), acc[i]);
    acc[i] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summs), _mm512_mul_ps(dmin, dx), acc[i]);
  }
}

// Activation rows [0, MR) (xq, xs with row stride nb) times one repacked panel; y[i * ldy + r]
// for the lanes r in `store`.
template <int MR>
void Q4KPanelRows(const Q4KPanelBlock* panel, int64_t nb, const BlockQ8_K* xq, const int16_t* xs,
                  float* y, int64_t ldy, __mmask16 store) {
  __m512 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KPanelBlock& p = panel[b];
    __m512i sumi16[MR];
    TG_UNROLL
    for (int i = 0; i < MR; ++i) sumi16[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i q[8];
      TG_UNROLL
      for (int g = 0; g < 8; ++g) q[g] = _mm512_load_si512(p.qs[c][g]);
      AddSubBlockPair<MR>(q, p.s, xq, nb, b, c, sumi16);
    }
    FinishSuperBlock<MR>(p.s, xq, xs, nb, b, sumi16, acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, store, acc[i]);
}

// Q4KPanelRows with the panel transposed in registers, super-block by super-block, and never
// stored: for the calls that meet it once (n <= 4: decode, beams), where storing and reloading
// the panel cost ~30% of the decode kernel's speed (ops-bench --kquant, n = 1).
template <int MR, bool kFull>
void Q4KDirectRows(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb, const BlockQ8_K* xq,
                   const int16_t* xs, float* y, int64_t ldy) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  __m512 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  Q4KPanelScales s;
  __m512i t[kLanes];
  RowsAheadPrefetch<sizeof(BlockQ4_K), 4> prefetch(w0, row_bytes, nb);
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.Step();
    const uint8_t* base = w0 + b * sizeof(BlockQ4_K);
    RepackScales<kFull>(base, row_bytes, rows, &s);
    __m512i sumi16[MR];
    TG_UNROLL
    for (int i = 0; i < MR; ++i) sumi16[i] = _mm512_setzero_si512();
    TG_UNROLL
    for (int half = 0; half < 2; ++half) {
      TransposeQs<kFull>(base, row_bytes, rows, half, t);
      AddSubBlockPair<MR>(t, s, xq, nb, b, 2 * half, sumi16);
      AddSubBlockPair<MR>(t + 8, s, xq, nb, b, 2 * half + 1, sumi16);
    }
    FinishSuperBlock<MR>(s, xq, xs, nb, b, sumi16, acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, valid, acc[i]);
}

// ---- Q4_0 ----

// One block of a 16-row panel: qs[g], lane r: qs bytes 4g .. 4g + 3 of row r (low nibbles:
// values 4g .. 4g + 3, high: 16 + 4g ..); d as F32.
struct alignas(64) Q4_0PanelBlock {
  uint8_t qs[4][64];
  float d[kLanes];
};

inline const uint8_t* QsOfQ4_0Block(const uint8_t* w0, int64_t b) {
  return w0 + b * sizeof(BlockQ4_0) + offsetof(BlockQ4_0, qs);
}

// F32 d (the F16 at the block's start, as Q4_0 and Q8_0 store it) of block b of the 16 rows at
// w0 (lanes in `valid`, others zero).
template <size_t kBlockBytes>
inline __m512 LoadBlockScales(const uint8_t* w0, size_t row_bytes, __mmask16 valid, int64_t b) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i row_off = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i d =
      _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, row_off, w0 + b * kBlockBytes, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));
}

// Rows [0, rows) of the Q4_0 rows at w0, all nb blocks, into out[0 .. nb).
void RepackQ4_0Panel(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb,
                     Q4_0PanelBlock* out) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  __m512i q[4];
  for (int64_t b = 0; b < nb; ++b) {
    Transpose16x4<false>(QsOfQ4_0Block(w0, b), row_bytes, rows, q);
    TG_UNROLL
    for (int g = 0; g < 4; ++g) _mm512_store_si512(out[b].qs[g], q[g]);
    _mm512_store_ps(out[b].d, LoadBlockScales<sizeof(BlockQ4_0)>(w0, row_bytes, valid, b));
  }
}

// Block b (q[g] as Transpose16x4 gives, d its F32 scales) times activation rows [0, MR):
// acc = fma(F32(sumi), d_w * d_x, acc).
template <int MR>
[[gnu::always_inline]] inline void AddQ4_0Block(const __m512i (&q)[4], __m512 d,
                                                const BlockQ8_1* xq, int64_t nb, int64_t b,
                                                __m512 (&acc)[MR]) {
  __m512i lo[MR], hi[MR];
  const int8_t* x[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    lo[i] = _mm512_set1_epi32(-8 * xq[i * nb + b].sum);  // the values' -8 offset, exact
    hi[i] = _mm512_setzero_si512();
    x[i] = xq[i * nb + b].qs;
  }
  AddNibbleDots<MR, 4, 16>(q, x, lo, hi);  // hi: 16 x the high nibbles' sum
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    const __m512i sumi = _mm512_add_epi32(lo[i], _mm512_srai_epi32(hi[i], 4));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi),
                             _mm512_mul_ps(d, _mm512_set1_ps(xq[i * nb + b].d)), acc[i]);
  }
}

// Activation rows [0, MR) times one repacked panel of blocks with one scale each (Q4_0, Q8_0:
// qs[kGroups][64], d[16]): add(q, d, b, acc) adds block b; y[i * ldy + r] for the lanes in store.
template <int MR, int kGroups, typename PanelBlock, typename Add>
[[gnu::always_inline]] inline void ScaledPanelRows(const PanelBlock* panel, int64_t nb, float* y,
                                                   int64_t ldy, __mmask16 store, Add&& add) {
  __m512 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i q[kGroups];
    TG_UNROLL
    for (int g = 0; g < kGroups; ++g) q[g] = _mm512_load_si512(panel[b].qs[g]);
    add(q, _mm512_load_ps(panel[b].d), b, acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, store, acc[i]);
}

// Activation rows [0, MR) (xq with row stride nb) times one repacked Q4_0 panel.
template <int MR>
void Q4_0PanelRows(const Q4_0PanelBlock* panel, int64_t nb, const BlockQ8_1* xq, float* y,
                   int64_t ldy, __mmask16 store) {
  ScaledPanelRows<MR, 4>(
      panel, nb, y, ldy, store,
      [&](const __m512i(&q)[4], __m512 d, int64_t b, __m512(&acc)[MR])
          __attribute__((always_inline)) { AddQ4_0Block<MR>(q, d, xq, nb, b, acc); });
}

// The calls of at most kDirectRows activation rows: each block loaded and transposed in
// registers, never stored.
template <int MR, bool kFull>
void Q4_0DirectRows(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb, const BlockQ8_1* xq,
                    float* y, int64_t ldy) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  __m512 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchNextPanel<sizeof(BlockQ4_0)>(w0, row_bytes, b);
    __m512i q[4];
    Transpose16x4<kFull>(QsOfQ4_0Block(w0, b), row_bytes, rows, q);
    AddQ4_0Block<MR>(q, LoadBlockScales<sizeof(BlockQ4_0)>(w0, row_bytes, valid, b), xq, nb, b,
                     acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, valid, acc[i]);
}

// ---- Q8_0 ----
//
// VPDPBUSD multiplies u8 by s8 and both sides are signed: the weights go in as q_w ^ 0x80 (= q_w +
// 128 read as u8; the sign trick instead would need VPSIGNB, which has no 512-bit form, and
// cannot negate -128), and each activation block's sum starts from -128 x sum(q_x), so the lanes
// end at the exact sum of q_w * q_x (|.| <= 32 * 255 * 128 before the offset).

// One block of a 16-row panel: qs[g], lane r: q_w + 128 of values 4g .. 4g + 3 of row r; d as
// F32.
struct alignas(64) Q8_0PanelBlock {
  uint8_t qs[8][64];
  float d[kLanes];
};

// q[g], lane r: values 4g .. 4g + 3 of the Q8_0 block at block + r * row_bytes, + 128 as u8
// (rows < rows; the others hold 128s, never stored).
template <bool kFull>
[[gnu::always_inline]] inline void TransposeQ8_0(const uint8_t* block, size_t row_bytes, int rows,
                                                 __m512i (&q)[8]) {
  const uint8_t* qs = block + offsetof(BlockQ8_0, qs);
  __m512i lo[4], hi[4];
  Transpose16x4<kFull>(qs, row_bytes, rows, lo);
  Transpose16x4<kFull>(qs + 16, row_bytes, rows, hi);
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  TG_UNROLL
  for (int g = 0; g < 4; ++g) {
    q[g] = _mm512_xor_si512(lo[g], k80);
    q[4 + g] = _mm512_xor_si512(hi[g], k80);
  }
}

void RepackQ8_0Panel(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb,
                     Q8_0PanelBlock* out) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  __m512i q[8];
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchNextPanel<sizeof(BlockQ8_0)>(w0, row_bytes, b);
    TransposeQ8_0<false>(w0 + b * sizeof(BlockQ8_0), row_bytes, rows, q);
    TG_UNROLL
    for (int g = 0; g < 8; ++g) _mm512_store_si512(out[b].qs[g], q[g]);
    _mm512_store_ps(out[b].d, LoadBlockScales<sizeof(BlockQ8_0)>(w0, row_bytes, valid, b));
  }
}

// Block b (q as TransposeQ8_0 gives, d its F32 scales) times activation rows [0, MR) (xq, and
// dx / cx from PrepareQ8_0Columns, row stride nb): acc = fma(F32(sumi), d_w * d_x, acc).
template <int MR>
[[gnu::always_inline]] inline void AddQ8_0Block(const __m512i (&q)[8], __m512 d,
                                                const BlockQ8_0* xq, const float* dx,
                                                const int32_t* cx, int64_t nb, int64_t b,
                                                __m512 (&acc)[MR]) {
  __m512i s[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) s[i] = _mm512_set1_epi32(cx[i * nb + b]);
  TG_UNROLL
  for (int g = 0; g < 8; ++g) {
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      s[i] = _mm512_dpbusd_epi32(s[i], q[g], _mm512_set1_epi32(Load32(xq[i * nb + b].qs + 4 * g)));
    }
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]),
                             _mm512_mul_ps(d, _mm512_set1_ps(dx[i * nb + b])), acc[i]);
  }
}

template <int MR>
void Q8_0PanelRows(const Q8_0PanelBlock* panel, int64_t nb, const BlockQ8_0* xq, const float* dx,
                   const int32_t* cx, float* y, int64_t ldy, __mmask16 store) {
  ScaledPanelRows<MR, 8>(
      panel, nb, y, ldy, store,
      [&](const __m512i(&q)[8], __m512 d, int64_t b, __m512(&acc)[MR])
          __attribute__((always_inline)) { AddQ8_0Block<MR>(q, d, xq, dx, cx, nb, b, acc); });
}

template <int MR, bool kFull>
void Q8_0DirectRows(const uint8_t* w0, size_t row_bytes, int rows, int64_t nb, const BlockQ8_0* xq,
                    const float* dx, const int32_t* cx, float* y, int64_t ldy) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  __m512 acc[MR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  RowsAheadPrefetch<sizeof(BlockQ8_0), 16> prefetch(w0, row_bytes, nb);
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.Step();
    __m512i q[8];
    TransposeQ8_0<kFull>(w0 + b * sizeof(BlockQ8_0), row_bytes, rows, q);
    AddQ8_0Block<MR>(q, LoadBlockScales<sizeof(BlockQ8_0)>(w0, row_bytes, valid, b), xq, dx, cx, nb,
                     b, acc);
  }
  TG_UNROLL
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, valid, acc[i]);
}

}  // namespace

void SubBlockSumsForQ4K(const BlockQ8_K* xq, int64_t count, int16_t* out) {
  for (int64_t b = 0; b < count; ++b) {
    for (int j = 0; j < 8; ++j) {
      out[8 * b + j] = static_cast<int16_t>(xq[b].bsums[2 * j] + xq[b].bsums[2 * j + 1]);
    }
  }
}

void GemvQ4KColumns(const WeightView& w, const BlockQ8_K* xq, const int16_t* xs, int64_t n,
                    float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkK;
  const size_t rb = w.row_bytes();
  RunColumns<Q4KPanelBlock>(
      n, nb, r0, r1,
      [&]<int MR, bool kFull>(int64_t r, int rows) {
        Q4KDirectRows<MR, kFull>(w.row(r), rb, rows, nb, xq, xs, y + r, ldy);
      },
      [&](int64_t r, int rows, Q4KPanelBlock* panel) {
        RepackQ4KPanel(w.row(r), rb, rows, nb, panel);
      },
      [&]<int MR>(const Q4KPanelBlock* panel, int64_t i, int64_t r, __mmask16 store) {
        Q4KPanelRows<MR>(panel, nb, xq + i * nb, xs + i * nb * 8, y + i * ldy + r, ldy, store);
      });
}

void GemvQ4_0Columns(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                     int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkSmall;
  const size_t rb = w.row_bytes();
  RunColumns<Q4_0PanelBlock>(
      n, nb, r0, r1,
      [&]<int MR, bool kFull>(int64_t r, int rows) {
        Q4_0DirectRows<MR, kFull>(w.row(r), rb, rows, nb, xq, y + r, ldy);
      },
      [&](int64_t r, int rows, Q4_0PanelBlock* panel) {
        RepackQ4_0Panel(w.row(r), rb, rows, nb, panel);
      },
      [&]<int MR>(const Q4_0PanelBlock* panel, int64_t i, int64_t r, __mmask16 store) {
        Q4_0PanelRows<MR>(panel, nb, xq + i * nb, y + i * ldy + r, ldy, store);
      });
}

void PrepareQ8_0Columns(const BlockQ8_0* xq, int64_t count, float* dx, int32_t* cx) {
  const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < count; ++b) {
    // sum(q_x + 128) by VPSADBW (4 sums of 8 bytes), less 32 * 128.
    const __m256i sad = _mm256_sad_epu8(
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[b].qs)), k80),
        _mm256_setzero_si256());
    const __m128i pair =
        _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    const int64_t sum = _mm_cvtsi128_si64(pair) + _mm_extract_epi64(pair, 1) - 32 * 128;
    dx[b] = half::F16ToF32(xq[b].d);
    cx[b] = static_cast<int32_t>(-128 * sum);
  }
}

void GemvQ8_0Columns(const WeightView& w, const BlockQ8_0* xq, const float* dx, const int32_t* cx,
                     int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.in / kQkSmall;
  const size_t rb = w.row_bytes();
  RunColumns<Q8_0PanelBlock>(
      n, nb, r0, r1,
      [&]<int MR, bool kFull>(int64_t r, int rows) {
        Q8_0DirectRows<MR, kFull>(w.row(r), rb, rows, nb, xq, dx, cx, y + r, ldy);
      },
      [&](int64_t r, int rows, Q8_0PanelBlock* panel) {
        RepackQ8_0Panel(w.row(r), rb, rows, nb, panel);
      },
      [&]<int MR>(const Q8_0PanelBlock* panel, int64_t i, int64_t r, __mmask16 store) {
        Q8_0PanelRows<MR>(panel, nb, xq + i * nb, dx + i * nb, cx + i * nb, y + i * ldy + r, ldy,
                          store);
      });
}

#endif  // TG_KQUANT_512

TG_ISA_END
}  // namespace textgen::ops
