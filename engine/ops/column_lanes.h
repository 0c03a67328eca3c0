// Pieces shared by the column-lane kernels (engine/ops/quant_columns.h): 16 weight rows per
// zmm, one per int32 lane, activations broadcast 4 bytes at a time.
#ifndef TEXTGEN_ENGINE_OPS_COLUMN_LANES_H_
#define TEXTGEN_ENGINE_OPS_COLUMN_LANES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_simd.h"

#if defined(TG_KQUANT_512)
namespace textgen::ops {
TG_ISA_BEGIN
namespace columns {

constexpr int kLanes = 16;  // weight rows per panel: one per int32 lane of a zmm

// Calls with at most this many activation rows (decode, beams) meet each panel once: they
// transpose it in registers instead of storing it.
constexpr int64_t kDirectRows = 4;

inline int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// All 16 lanes of row r's load if r < rows, else none: a masked load, branch-free (the
// branches of `r < rows ? load : zero` kept the transposes' operands in memory), and never
// touching the bytes past the last row.
template <bool kFull = false>
inline __mmask16 RowMask(int r, int rows) {
  return static_cast<__mmask16>(kFull || r < rows ? 0xFFFF : 0);
}

// t[k], lane r = v[r], lane k: a 16 x 16 transpose of int32 (4 rounds of 16 shuffles).
[[gnu::always_inline]] inline void Transpose16(const __m512i (&v)[kLanes], __m512i (&t)[kLanes]) {
  __m512i a[kLanes], b[kLanes];
  TG_UNROLL
  for (int r = 0; r < kLanes; r += 2) {  // pairs of rows, dword-interleaved
    a[r] = _mm512_unpacklo_epi32(v[r], v[r + 1]);
    a[r + 1] = _mm512_unpackhi_epi32(v[r], v[r + 1]);
  }
  TG_UNROLL
  for (int r = 0; r < kLanes; r += 4) {  // quads, qword-interleaved
    TG_UNROLL
    for (int h = 0; h < 2; ++h) {
      b[r + h] = _mm512_unpacklo_epi64(a[r + h], a[r + 2 + h]);
      b[r + 2 + h] = _mm512_unpackhi_epi64(a[r + h], a[r + 2 + h]);
    }
  }
  // b[4q + m], 128-bit lane L: dword 4L + m' of rows 4q .. 4q + 3 (m' = (m % 2) * 2 + m / 2).
  TG_UNROLL
  for (int q = 0; q < 2; ++q) {  // 128-bit lanes of quads 2q' and 2q' + 1 merged
    TG_UNROLL
    for (int m = 0; m < 4; ++m) {
      const __m512i x = b[8 * q + m], y = b[8 * q + 4 + m];
      a[8 * q + m] = _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0));
      a[8 * q + 4 + m] = _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }
  TG_UNROLL
  for (int m = 0; m < 8; ++m) {
    const __m512i x = a[m], y = a[8 + m];
    const __m512i even = _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd = _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1));
    // a[m]: m < 4 -> lanes L = 0, 2 of quads; m >= 4 -> L = 1, 3. even: L = 0 (or 1), odd: 2 (3).
    const int mm = m % 4, dword = (mm % 2) * 2 + mm / 2, lane = m / 4;
    t[4 * lane + dword] = even;
    t[4 * (lane + 2) + dword] = odd;
  }
}

// For each panel of 16 weight rows in [r0, r1): repack(panel rows, rows) once, then
// rows<MR>(activation row i, y + i * ldy + r, lane mask) for MR = 4, then the 1-3 left.
template <typename Repack, typename Rows>
void ForPanels(int64_t n, int64_t r0, int64_t r1, Repack&& repack, Rows&& rows) {
  for (int64_t r = r0; r < r1; r += kLanes) {
    const int count = static_cast<int>(std::min<int64_t>(kLanes, r1 - r));
    repack(r, count);
    const __mmask16 store = static_cast<__mmask16>((1u << count) - 1);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) rows.template operator()<4>(i, r, store);
    switch (n - i) {
      case 3:
        rows.template operator()<3>(i, r, store);
        break;
      case 2:
        rows.template operator()<2>(i, r, store);
        break;
      case 1:
        rows.template operator()<1>(i, r, store);
        break;
      default:
        break;
    }
  }
}

// lo[i] += the low nibbles of q[g] times activations x[i] + 4g .. + 3, hi16[i] += 16 x the high
// nibbles times x[i] + kHigh + 4g .. + 3, for g < kGroups: exact int32 (VPDPBUSD, u8 x s8), the
// 4 activation bytes broadcast to every lane (weight row). The high nibbles stay in place (q &
// 0xF0, 16 x the value): one AND per vector instead of a shift and an AND, the 16 taken out once
// per sum by the caller (an exact shift: every term is a multiple of 16).
template <int MR, int kGroups, int kHigh>
[[gnu::always_inline]] inline void AddNibbleDots(const __m512i* q, const int8_t* const (&x)[MR],
                                                 __m512i (&lo)[MR], __m512i (&hi16)[MR]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8(static_cast<char>(0xF0));
  TG_UNROLL
  for (int g = 0; g < kGroups; ++g) {
    const __m512i wl = _mm512_and_si512(q[g], m4);
    const __m512i wh = _mm512_and_si512(q[g], m4h);
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      lo[i] = _mm512_dpbusd_epi32(lo[i], wl, _mm512_set1_epi32(Load32(x[i] + 4 * g)));
      hi16[i] = _mm512_dpbusd_epi32(hi16[i], wh, _mm512_set1_epi32(Load32(x[i] + kHigh + 4 * g)));
    }
  }
}

// Prefetch of block b of the next panel (16 rows, contiguous after this one's), for decode,
// where the weights come from DRAM: as many bytes per step as a step reads (blocks of
// kBlockBytes).
template <size_t kBlockBytes>
[[gnu::always_inline]] inline void PrefetchNextPanel(const uint8_t* w0, size_t row_bytes,
                                                     int64_t b) {
  constexpr int kBytes = kLanes * static_cast<int>(kBlockBytes);
  const char* next = reinterpret_cast<const char*>(w0) + kLanes * row_bytes + b * kBytes;
  TG_UNROLL
  for (int line = 0; line < kBytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
}

// The decode (direct) calls' prefetch (Q4_K, Q8_0), in the order a panel is read: kAhead blocks
// ahead, each of the 16 rows' block (past the panel's last block, the next panel's first ones),
// kBlockBytes / 64 lines per row (for Q4_K's 144-byte blocks at 16-byte-aligned offsets, 3 lines
// cover a block). Why not PrefetchNextPanel's linear sweep of the next panel (which prefill's
// repack keeps): it holds a whole panel in flight (16 rows x row_bytes, 36 KiB for 4096-wide rows),
// and from DRAM it read much slower. Measured on the Emerald Rapids VM (ops-bench --kquant, one
// thread, Q4_K, fastest of 100 calls, 3 rounds alternated, us per call, sweep -> this): 32000 x
// 4096 from DRAM at 1 row 6,682-7,260 -> 3,438-4,978, at 4 rows 9,794-9,945 -> 5,310-7,836;
// from L3 (32000 x 768) 638-645 -> 738-767 (16% slower); from L2 the same. End to end:
// TinyLlama Q4_K_M decode 27.2-28.3 -> 29.3-31.6 tok/s (4 rounds), beam 4 47.5-53.0 ->
// 42.1-43.7 ms/token; stories110M Q4_K_M (its 71 MB sit in this VM's L3) decode 330-334 ->
// 314-317 (-5%). Real models stream from DRAM, so DRAM decides. Q8_0 (34-byte blocks, 16 ahead:
// about as many bytes): TinyLlama Q8_0 decode 15.4-16.0 -> 17.2-19.3 tok/s (3 rounds). Q4_0 (18
// bytes, most per-row prefetches repeats) measured slower with it and keeps the sweep.
template <size_t kBlockBytes, int kAhead>
class RowsAheadPrefetch {
 public:
  // For the panel at w0 (nb blocks per row): Step() at block b prefetches the block kAhead blocks
  // later in reading order, in this panel or the following ones (short rows: nb < kAhead).
  RowsAheadPrefetch(const uint8_t* w0, size_t row_bytes, int64_t nb)
      : row_bytes_(row_bytes), nb_(nb), block_(kAhead % nb) {
    p_ = reinterpret_cast<const char*>(w0) + kAhead / nb * kLanes * static_cast<int64_t>(row_bytes);
  }

  [[gnu::always_inline]] void Step() {
    const char* p = p_ + block_ * static_cast<int64_t>(kBlockBytes);
    TG_UNROLL
    for (int r = 0; r < kLanes; ++r) {
      TG_UNROLL
      for (int line = 0; line < static_cast<int>(kBlockBytes); line += 64) {
        _mm_prefetch(p + r * row_bytes_ + line, _MM_HINT_T0);
      }
    }
    if (++block_ == nb_) {
      block_ = 0;
      p_ += kLanes * row_bytes_;
    }
  }

 private:
  const char* p_;
  size_t row_bytes_;
  int64_t nb_, block_;
};

// q[k], lane r = dword k of the 16 bytes at p + r * row_bytes (rows < rows; zero above). Vector
// z[k] holds rows 4L + k in its 128-bit lanes L; a 4 x 4 dword transpose within the lanes then
// gives every dword in row order (for blocks whose rows are not 64-byte transposable: Q4_0's 18
// bytes; a gather per dword was slower).
template <bool kFull>
[[gnu::always_inline]] inline void Transpose16x4(const uint8_t* p, size_t row_bytes, int rows,
                                                 __m512i (&q)[4]) {
  __m512i z[4];
  TG_UNROLL
  for (int k = 0; k < 4; ++k) {
    auto row = [&](int r) {
      return _mm_maskz_loadu_epi32(static_cast<__mmask8>(RowMask<kFull>(r, rows)),
                                   p + r * row_bytes);
    };
    z[k] = _mm512_inserti32x4(
        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(row(k)), row(4 + k), 1),
                           row(8 + k), 2),
        row(12 + k), 3);
  }
  const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]), a1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]), a3 = _mm512_unpackhi_epi32(z[2], z[3]);
  q[0] = _mm512_unpacklo_epi64(a0, a2);
  q[1] = _mm512_unpackhi_epi64(a0, a2);
  q[2] = _mm512_unpacklo_epi64(a1, a3);
  q[3] = _mm512_unpackhi_epi64(a1, a3);
}

// For each panel of 16 weight rows in [r0, r1): direct<MR = n, kFull = (rows == 16)>(r, rows),
// n <= kDirectRows. kFull lets full panels load rows without masks (the masks' scalar work was
// a tenth of the decode kernels' instructions).
template <typename Direct>
void ForDirectPanels(int64_t n, int64_t r0, int64_t r1, Direct&& direct) {
  auto run = [&]<int MR>(int64_t r, int rows) {
    if (rows == kLanes) return direct.template operator()<MR, true>(r, rows);
    direct.template operator()<MR, false>(r, rows);
  };
  for (int64_t r = r0; r < r1; r += kLanes) {
    const int rows = static_cast<int>(std::min<int64_t>(kLanes, r1 - r));
    switch (n) {
      case 4:
        run.template operator()<4>(r, rows);
        break;
      case 3:
        run.template operator()<3>(r, rows);
        break;
      case 2:
        run.template operator()<2>(r, rows);
        break;
      default:
        run.template operator()<1>(r, rows);
        break;
    }
  }
}

// A column kernel's call: with at most kDirectRows activation rows, direct<MR, kFull>(r, rows)
// per panel (ForDirectPanels); with more, each panel repacked once, repack(r, rows, buffer), into
// a per-thread buffer of nb PanelBlocks, then rows<MR>(buffer, i, r, store) per group of
// activation rows (ForPanels).
template <typename PanelBlock, typename Direct, typename Repack, typename Rows>
void RunColumns(int64_t n, int64_t nb, int64_t r0, int64_t r1, Direct&& direct, Repack&& repack,
                Rows&& rows) {
  if (n <= kDirectRows) return ForDirectPanels(n, r0, r1, direct);
  thread_local std::vector<PanelBlock> buffer;
  buffer.resize(static_cast<size_t>(nb));
  PanelBlock* panel = buffer.data();
  ForPanels(
      n, r0, r1, [&](int64_t r, int count) { repack(r, count, panel); },
      [&]<int MR>(int64_t i, int64_t r, __mmask16 store) {
        rows.template operator()<MR>(panel, i, r, store);
      });
}

}  // namespace columns
TG_ISA_END
}  // namespace textgen::ops
#endif  // TG_KQUANT_512

#endif  // TEXTGEN_ENGINE_OPS_COLUMN_LANES_H_
