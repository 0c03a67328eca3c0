#include "engine/ops/gemv_blocking.h"

#include <algorithm>

#include "engine/ops/threading.h"

namespace textgen::ops {
namespace {

// Rows per range start: whole register tiles (the kernels take up to 8 weight rows per tile).
constexpr int64_t kRowAlign = 16;
// Activation rows the kernels tile together (simd::ForActivationRows).
constexpr int64_t kTileRows = 4;
// L2 budget of each operand: the activation chunk is re-read once per weight tile, the weight
// block once per 4 activation rows. 2 x 256 KiB fit the smallest L2 we run on (1 MiB, Zen 5).
constexpr int64_t kChunkBytes = int64_t{256} << 10;

int64_t RowsWithin(int64_t bytes_per_row, int64_t align) {
  const int64_t rows = kChunkBytes / std::max<int64_t>(bytes_per_row, 1);
  return std::max(align, rows / align * align);
}

}  // namespace

void RunGemvBlocks(int64_t n, int64_t out, int64_t x_row_bytes, int64_t w_row_bytes, int threads,
                   absl::FunctionRef<void(int64_t i0, int64_t i1, int64_t r0, int64_t r1)> kernel) {
  if (n <= kTileRows) {
    ParallelFor(out, kRowAlign, threads, [&](int64_t r0, int64_t r1) { kernel(0, n, r0, r1); });
    return;
  }
  const int64_t chunk = RowsWithin(x_row_bytes, kTileRows);
  const int64_t block = RowsWithin(w_row_bytes, kRowAlign);
  ParallelFor(out, kRowAlign, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
      const int64_t i1 = std::min(n, i0 + chunk);
      for (int64_t b0 = r0; b0 < r1; b0 += block) kernel(i0, i1, b0, std::min(r1, b0 + block));
    }
  });
}

}  // namespace textgen::ops
