// Cache blocking for the row-streaming (GEMV) kernels when a call has many activation rows
// (prefill chunks, large decode batches), so that they can serve every row count and Linear's
// result for a row never depends on the other rows of the call (batch invariance).
//
// The kernels already compute each (activation row, weight row) dot product with one fixed
// sequence of vector FMAs and one fixed horizontal reduction, whatever tile the pair lands in
// (engine/ops/simd.h Reduce1/Reduce4); only their memory traffic depends on the row count: one
// pass over the weights per 4 activation rows. This helper cuts a call into pieces whose
// operands stay in L2 (a chunk of activation rows times a block of weight rows), without
// changing any dot product: no split of the reduction (K) dimension, ever.
#ifndef TEXTGEN_ENGINE_OPS_GEMV_BLOCKING_H_
#define TEXTGEN_ENGINE_OPS_GEMV_BLOCKING_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace textgen::ops {

// kernel(i0, i1, r0, r1) computes y rows [i0, i1) x columns [r0, r1) from activation rows
// [i0, i1) and weight rows [r0, r1); it must be safe to run concurrently on disjoint column
// ranges. RunGemvBlocks covers [0, n) x [0, out):
//   - columns split by ParallelFor over `threads` threads in ranges starting at multiples of 16
//     (as GemvMatmul always did), never the reduction dimension;
//   - with n <= 4, one call per thread range (the decode path, unchanged);
//   - above, activation rows in chunks of about 256 KiB (`x_row_bytes` per row, a multiple of
//     4 rows), and within each chunk weight rows in blocks of about 256 KiB (`w_row_bytes` per
//     row, multiples of 16 rows), so both stay in L2 while the kernel's 4-row tiles loop.
void RunGemvBlocks(int64_t n, int64_t out, int64_t x_row_bytes, int64_t w_row_bytes, int threads,
                   absl::FunctionRef<void(int64_t i0, int64_t i1, int64_t r0, int64_t r1)> kernel);

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_GEMV_BLOCKING_H_
