// The few-rows path behind Linear: y[n, out] = x[n, in] · Wᵀ for decode batches, reading every
// weight once per call at its stored size (F32, F16, BF16 or Q8_0).
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
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_dot_more.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

struct KernelTable;

// y[n, w.out] = x[n, w.in] . w^T for Q8_0 weights in the fast mode (--compute bf16), with the
// kernels of one level's table `k`: activations quantized to Q8_0 once per call, packed for
// that level, then its kernel over RunGemvBlocks' ranges on `threads` threads. GemvMatmul runs
// it with the level measured for Q8_0 (kernel_calibration.h), the calibration with each
// candidate level.
void RunQ8_0Int8(const KernelTable& k, const WeightView& w, const float* x, int64_t n, float* y,
                 int threads);

class GemvMatmul final : public MatmulKernel {
 public:
  // `w` must outlive the object. Under compute kBf16, Q8_0 weights use the int8 VNNI kernel
  // (activations quantized to Q8_0 per call), the K-quants and IQ4_XS int8 dot products with
  // activations quantized to Q8_K per call (engine/ops/kquant_dot.h, kquant_dot_more.h), Q4_0,
  // Q4_1, Q5_0, Q5_1 and IQ4_NL int8 dot products with Q8_0 / Q8_1 activations
  // (engine/ops/quant_dot_small.h), and BF16 weights the BF16 dot-product kernel (activations
  // rounded to BF16 per call: VDPBF16PS, or F32 FMAs on the activations widened back to F32
  // when `bf16_dot_in_f32`, by default the process's Bf16DotInF32()); every other combination
  // multiplies in F32.
  GemvMatmul(const WeightView& w, LinearCompute compute, int64_t parallel_min_bytes)
      : GemvMatmul(w, compute, parallel_min_bytes, Bf16DotInF32()) {}
  GemvMatmul(const WeightView& w, LinearCompute compute, int64_t parallel_min_bytes,
             bool bf16_dot_in_f32)
      : w_(w),
        compute_(compute),
        parallel_min_bytes_(parallel_min_bytes),
        bf16_dot_in_f32_(bf16_dot_in_f32) {}

  absl::Status Run(const float* x, int64_t n, float* y) const override;
  std::string Name() const override;

 private:
  bool Vnni() const { return w_.type == WeightType::kQ8_0 && compute_ == LinearCompute::kBf16; }
  // Q8_K activations: Q4_K / Q6_K (kquant_dot.h), Q2_K / Q3_K / Q5_K / IQ4_XS (kquant_dot_more.h).
  bool KQuantInt8() const {
    return (HasKQuantInt8(w_.type) || HasKQuantInt8More(w_.type)) &&
           compute_ == LinearCompute::kBf16;
  }
  // Q8_0 / Q8_1 activations: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (quant_dot_small.h).
  bool SmallQuantInt8() const {
    return HasSmallQuantInt8(w_.type) && compute_ == LinearCompute::kBf16;
  }
  bool Bf16Dot() const { return w_.type == WeightType::kBf16 && compute_ == LinearCompute::kBf16; }

  WeightView w_;
  LinearCompute compute_;
  int64_t parallel_min_bytes_;
  bool bf16_dot_in_f32_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_GEMV_MATMUL_H_
