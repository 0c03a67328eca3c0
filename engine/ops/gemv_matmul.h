// The few-rows path behind Linear: y[n, out] = x[n, in] · Wᵀ for decode batches, reading every
// weight once per call at its stored size (every WeightType).
//
// Bound: memory bandwidth. A decode step streams all weights once; at n <= 4 the arithmetic
// per weight byte is tiny, so the kernels only have to keep the loads flowing. Large weights
// are split by rows across NumThreads() pool threads, because one core alone does not
// saturate the memory system (measured in tests/bench/ops_bench.cc). Calls of more rows
// (batch-invariant Linear sends it every n) are cache-blocked (engine/ops/gemv_blocking.h):
// each row's result is the same bytes whatever n, its position and the thread count.
#ifndef TEXTGEN_ENGINE_OPS_GEMV_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_GEMV_MATMUL_H_

#include <cstdint>
#include <string>

#include "engine/ops/kernel_select.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

struct FormatMatmulEntry;

class GemvMatmul final : public MatmulKernel {
 public:
  // `w` must outlive the object. Each call runs the entry of w's format in the kernel
  // catalogue (format_kernels.h): under compute kF32 the exact one (F32 products); under kBf16
  // the fast one, chosen per call shape by measurement where the format gives the same bytes at
  // every level (kernel_calibration.h). For BF16 weights the fast mode multiplies by VDPBF16PS,
  // or in F32 FMAs on the activations rounded to BF16 and widened back when `bf16_dot_in_f32`
  // (by default the process's Bf16DotInF32()).
  GemvMatmul(const WeightView& w, LinearCompute compute, int64_t parallel_min_bytes)
      : GemvMatmul(w, compute, parallel_min_bytes, Bf16DotInF32()) {}
  GemvMatmul(const WeightView& w, LinearCompute compute, int64_t parallel_min_bytes,
             bool bf16_dot_in_f32)
      : w_(w),
        compute_(compute),
        parallel_min_bytes_(parallel_min_bytes),
        bf16_dot_in_f32_(bf16_dot_in_f32) {}

  absl::Status Run(const float* x, int64_t n, float* y) const override;
  // "gemv:<weight format>:<activation kind>", e.g. "gemv:q4_k:q8_k", "gemv:bf16:bf16-in-f32".
  std::string Name() const override;

 private:
  // The catalogue entry (format_kernels.h) a call of n rows runs.
  const FormatMatmulEntry& Entry(int64_t n) const;

  WeightView w_;
  LinearCompute compute_;
  int64_t parallel_min_bytes_;
  bool bf16_dot_in_f32_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_GEMV_MATMUL_H_
