#include "engine/ops/amx_tiles.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"
#include "engine/ops/threading.h"
#include "engine/ops/weight_convert.h"

// Built at every level, but empty below the amx one (the kernel table checks TG_AMX too).
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <immintrin.h>
#define TG_AMX 1
#endif

#if defined(TG_AMX)
namespace textgen::ops {
TG_ISA_BEGIN
namespace amx_tiles {
namespace {

constexpr int64_t kBlockOut = 16;
constexpr int64_t kBlockIn = 32;
constexpr int64_t kTileElems = kBlockOut * kBlockIn;  // BF16 values per weight tile (1 KiB)
constexpr int64_t kTileRows = 16;  // activation rows per A tile (and rows of a C tile)

// Activations of at least this many values are rounded to BF16 by all threads (~10 us on one).
constexpr int64_t kParallelMinActivations = int64_t{1} << 17;

// Calls with at least this many multiply-adds split across threads even when the weights are
// small: ~16M MACs keep one core's AMX unit busy for ~30k cycles, far above a fork/join.
constexpr int64_t kParallelMinMacs = int64_t{1} << 24;

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tile registers: A (activations, m rows x 32 BF16) in tmm0-1, B (weights, 16 k pairs x 16
// outputs) in tmm2-3, C (F32 sums, m rows x 16 outputs) in tmm4-7: C of x group g and output
// block b is tmm(4 + 2 g + b).
void LoadTileConfig(int m) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = static_cast<uint8_t>(t == 2 || t == 3 ? 16 : m);
  }
  // GCC's _tile_loadconfig declares only 8 bytes of its operand as read; this one covers all 64.
  asm volatile("ldtilecfg %0" ::"m"(cfg));
}

// Stores C tile `t` (a constant after inlining: the tile intrinsics need literal registers).
inline void StoreC(int t, float* dst, int64_t stride_bytes) {
  switch (t) {
    case 4:
      _tile_stored(4, dst, stride_bytes);
      break;
    case 5:
      _tile_stored(5, dst, stride_bytes);
      break;
    case 6:
      _tile_stored(6, dst, stride_bytes);
      break;
    default:
      _tile_stored(7, dst, stride_bytes);
      break;
  }
}

// Where one output block's C tile goes: y rows [row0, row0 + rows), columns [col0, col0 + cols).
// A whole tile goes straight to y; a partial one (the last rows or the last outputs) through
// `scratch` [m, 16].
inline void FlushC(int t, int m, float* y, int64_t ldy, int64_t row0, int64_t rows, int64_t col0,
                   int64_t cols, float* scratch) {
  if (rows <= 0 || cols <= 0) return;
  float* dst = y + row0 * ldy + col0;
  if (rows == m && cols == kBlockOut) {
    StoreC(t, dst, ldy * 4);
    return;
  }
  StoreC(t, scratch, 64);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(dst + i * ldy, scratch + i * 16, static_cast<size_t>(cols) * sizeof(float));
  }
}

// MB x groups times NB output blocks, summed over all k blocks. A tiles: group g's tile kb
// at a + g * a_next + kb * a_step (elements, rows 64 bytes apart); B tiles: block b's tile kb
// at w + b * b_next + kb * 512.
template <int MB, int NB>
inline void Micro(const uint16_t* a, int64_t a_step, int64_t a_next, const uint16_t* w,
                  int64_t b_next, int64_t k_blocks) {
  _tile_zero(4);
  if constexpr (NB == 2) _tile_zero(5);
  if constexpr (MB == 2) {
    _tile_zero(6);
    if constexpr (NB == 2) _tile_zero(7);
  }
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    const uint16_t* b0 = w + kb * kTileElems;
    const uint16_t* a0 = a + kb * a_step;
    _tile_loadd(2, b0, 64);
    if constexpr (NB == 2) _tile_loadd(3, b0 + b_next, 64);
    _tile_loadd(0, a0, 64);
    _tile_dpbf16ps(4, 0, 2);
    if constexpr (NB == 2) _tile_dpbf16ps(5, 0, 3);
    if constexpr (MB == 2) {
      _tile_loadd(1, a0 + a_next, 64);
      _tile_dpbf16ps(6, 1, 2);
      if constexpr (NB == 2) _tile_dpbf16ps(7, 1, 3);
    }
  }
}

struct RunArgs {
  const uint16_t* packed;  // [out_blocks, k_blocks, 16, 16, 2]
  int64_t k_blocks;
  const uint16_t* xb;  // [groups, k_blocks, m, 32] BF16, zero-padded
  int64_t n;           // valid rows of xb and y
  int64_t out;         // valid columns of y
  float* y;            // [n, ldy]
  int64_t ldy;         // y's row stride (>= out)
};

// Output blocks [ob0, ob1) for all rows.
void RunBlocks(const RunArgs& r, int64_t ob0, int64_t ob1) {
  // With n <= 16 the tiles have exactly n rows (no wasted loads or stores); above, groups of 16
  // rows, the activations zero-padded to whole groups.
  const int m = static_cast<int>(std::min<int64_t>(r.n, kTileRows));
  const int64_t groups = (r.n + kTileRows - 1) / kTileRows;
  const int64_t block_elems = r.k_blocks * kTileElems;
  const int64_t a_step = m * kBlockIn;         // elements per A tile
  const int64_t a_next = r.k_blocks * a_step;  // elements per group of rows
  alignas(64) float scratch[kTileRows * 16];
  LoadTileConfig(m);
  for (int64_t ob = ob0; ob < ob1; ob += 2) {
    const int nb = ob + 1 < ob1 ? 2 : 1;
    const uint16_t* b = r.packed + ob * block_elems;
    const int64_t col0 = ob * kBlockOut;
    for (int64_t g = 0; g < groups; g += 2) {
      const int mb = g + 1 < groups ? 2 : 1;
      const uint16_t* a = r.xb + g * a_next;
      if (mb == 2 && nb == 2) {
        Micro<2, 2>(a, a_step, a_next, b, block_elems, r.k_blocks);
      } else if (mb == 2) {
        Micro<2, 1>(a, a_step, a_next, b, block_elems, r.k_blocks);
      } else if (nb == 2) {
        Micro<1, 2>(a, a_step, a_next, b, block_elems, r.k_blocks);
      } else {
        Micro<1, 1>(a, a_step, a_next, b, block_elems, r.k_blocks);
      }
      for (int gi = 0; gi < mb; ++gi) {
        const int64_t row0 = (g + gi) * kTileRows;
        const int64_t rows = std::min<int64_t>(kTileRows, r.n - row0);
        for (int bi = 0; bi < nb; ++bi) {
          const int64_t c0 = col0 + bi * kBlockOut;
          FlushC(4 + 2 * gi + bi, m, r.y, r.ldy, row0, rows, c0,
                 std::min<int64_t>(kBlockOut, r.out - c0), scratch);
        }
      }
    }
  }
  // Drops the tile state so context switches of this thread save and restore 8 KiB less.
  _tile_release();
}

// W [out, in] BF16 row-major -> the tiles of output blocks [ob0, ob1) (layout: packed_).
void PackBlocks(const uint16_t* w, int64_t out, int64_t in, int64_t k_blocks, int64_t ob0,
                int64_t ob1, uint16_t* packed) {
  for (int64_t ob = ob0; ob < ob1; ++ob) {
    const int64_t row0 = ob * kBlockOut;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = kb * kBlockIn;
      uint16_t* tile = packed + (ob * k_blocks + kb) * kTileElems;
      if (row0 + kBlockOut <= out && k0 + kBlockIn <= in) {
        // Whole tile: move (k, k + 1) pairs as 32-bit words (W rows need not be 4-byte aligned).
        for (int64_t j = 0; j < kBlockOut; ++j) {
          const uint16_t* src = w + (row0 + j) * in + k0;
          for (int64_t p = 0; p < kBlockIn / 2; ++p) {
            std::memcpy(tile + p * 2 * kBlockOut + j * 2, src + 2 * p, 2 * sizeof(uint16_t));
          }
        }
        continue;
      }
      for (int64_t j = 0; j < kBlockOut; ++j) {
        for (int64_t kk = 0; kk < kBlockIn; ++kk) {
          const int64_t row = row0 + j, col = k0 + kk;
          tile[(kk / 2) * 2 * kBlockOut + j * 2 + kk % 2] =
              row < out && col < in ? w[row * in + col] : uint16_t{0};
        }
      }
    }
  }
}

// The A tile row of activation row i and k block kb in xb [groups, k_blocks, m, 32].
inline uint16_t* ActivationTileRow(uint16_t* xb, int64_t k_blocks, int64_t m, int64_t i,
                                   int64_t kb) {
  return xb + ((i / kTileRows * k_blocks + kb) * m + i % kTileRows) * kBlockIn;
}

// x [n, in] F32, rows [i0, i1) -> their rows of xb (round to nearest even, as
// ToBf16Activations), zeros past `in`.
void PackActivations(const float* x, int64_t in, int64_t k_blocks, int64_t m, int64_t i0,
                     int64_t i1, uint16_t* xb) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* row = x + i * in;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      const int64_t k0 = kb * kBlockIn;
      // Masked loads read nothing past the row and give zeros there.
      const __m512 lo = _mm512_maskz_loadu_ps(simd::TailMask(in - k0), row + k0);
      const __m512 hi =
          _mm512_maskz_loadu_ps(simd::TailMask(std::max<int64_t>(in - k0 - 16, 0)), row + k0 + 16);
      _mm512_storeu_si512(ActivationTileRow(xb, k_blocks, m, i, kb),
                          reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
}

}  // namespace

void PackWeights(const uint16_t* w, int64_t out, int64_t in, int64_t k_blocks, int64_t out_blocks,
                 uint16_t* dst) {
  ParallelFor(out_blocks, 1, NumThreads(),
              [&](int64_t ob0, int64_t ob1) { PackBlocks(w, out, in, k_blocks, ob0, ob1, dst); });
}

void Run(const AmxPackedWeights& p, const float* x, int64_t n, float* y) {
  // Activations rounded to BF16 once per call, shared read-only by all threads, straight into
  // the A tile layout xb [groups, p.k_blocks, m, 32] (m = n when n <= 16, else 16 with the rows
  // zero-padded to whole groups; zeros past in): each A tile is m * 64 contiguous bytes.
  const int64_t m = std::min<int64_t>(n, kTileRows);
  const int64_t groups = (n + kTileRows - 1) / kTileRows;
  thread_local std::vector<uint16_t> xb_buffer;
  xb_buffer.resize(static_cast<size_t>(groups * p.k_blocks * m * kBlockIn));
  uint16_t* xb = xb_buffer.data();
  const int64_t k_blocks = p.k_blocks, in = p.in;
  auto pack_rows = [&](int64_t i0, int64_t i1) { PackActivations(x, in, k_blocks, m, i0, i1, xb); };
  // Rows past n (up to whole groups of 16) are zeros, so their products are harmless.
  for (int64_t i = n; i < groups * m; ++i) {
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      std::memset(ActivationTileRow(xb, k_blocks, m, i, kb), 0, kBlockIn * sizeof(uint16_t));
    }
  }
  if (n * p.in >= kParallelMinActivations && NumThreads() > 1) {
    ParallelFor(n, 1, NumThreads(), pack_rows);
  } else {
    pack_rows(0, n);
  }
  // The tile loads are asm that GCC does not know reads memory: keep the stores above them.
  asm volatile("" ::: "memory");

  const bool parallel = p.bytes >= p.parallel_min_bytes || n * p.out * p.in >= kParallelMinMacs;
  const RunArgs args{p.data, p.k_blocks, xb, n, p.out, y, p.out};
  // Ranges start on even blocks: whole pairs for Micro<., 2>.
  ParallelFor(p.out_blocks, 2, parallel ? NumThreads() : 1,
              [&](int64_t ob0, int64_t ob1) { RunBlocks(args, ob0, ob1); });
}

void RunWidened(const WeightView& w, int64_t tile_rows, const float* x, int64_t n, float* y) {
  const int64_t in = w.in, k_blocks = (in + kBlockIn - 1) / kBlockIn;
  const int64_t m = std::min<int64_t>(n, kTileRows);
  const int64_t groups = (n + kTileRows - 1) / kTileRows;
  // Activations packed once for all tiles (as Run does), shared read-only.
  thread_local std::vector<uint16_t> xb_buffer;
  xb_buffer.assign(static_cast<size_t>(groups * k_blocks * m * kBlockIn), 0);
  uint16_t* xb = xb_buffer.data();
  ParallelFor(n, 1, n * in >= kParallelMinActivations ? NumThreads() : 1,
              [&](int64_t i0, int64_t i1) { PackActivations(x, in, k_blocks, m, i0, i1, xb); });
  asm volatile("" ::: "memory");
  const int64_t tiles = (w.out + tile_rows - 1) / tile_rows;
  ParallelForEach(tiles, NumThreads(), [&](int64_t t) {
    const int64_t r0 = t * tile_rows, r1 = std::min(w.out, r0 + tile_rows);
    const int64_t blocks = (r1 - r0 + kBlockOut - 1) / kBlockOut;
    // Per thread: rows [r0, r1) widened to BF16, then packed (both stay in L2).
    thread_local std::vector<uint16_t> widened, packed;
    widened.resize(static_cast<size_t>((r1 - r0) * in));
    packed.resize(static_cast<size_t>(blocks * k_blocks * kTileElems));
    ConvertRowsBf16(w, r0, r1, widened.data());
    PackBlocks(widened.data(), r1 - r0, in, k_blocks, 0, blocks, packed.data());
    asm volatile("" ::: "memory");
    RunBlocks(RunArgs{packed.data(), k_blocks, xb, n, r1 - r0, y + r0, w.out}, 0, blocks);
  });
}

}  // namespace amx_tiles
TG_ISA_END
}  // namespace textgen::ops
#endif  // TG_AMX
