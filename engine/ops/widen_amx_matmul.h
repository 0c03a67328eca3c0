// Many-row products (prefill, decode batches above gemv_max_rows) on weights the AMX kernel
// cannot stream as stored, under LinearCompute::kBf16: Q8_0 (and BF16/F16 read in place).
// Each thread widens an L2-sized tile of weight rows to BF16, packs it for AMX and runs the
// AMX kernel on it, so the widened copy never leaves L2 and the stored weights are read once
// per call. Bound: AMX tile throughput at prefill sizes (the widening is one pass over ~34
// bytes per 32 weights); measured 1.5x oneDNN's BF16 matmul on the same widened tiles
// (stories110M Q8_0 prefill; commit 0a27afb).
#ifndef TEXTGEN_ENGINE_OPS_WIDEN_AMX_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_WIDEN_AMX_MATMUL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

class WidenAmxMatmul final : public MatmulKernel {
 public:
  // Keeps the view (w.data must outlive the object). FailedPrecondition without AMX.
  static absl::StatusOr<std::unique_ptr<WidenAmxMatmul>> Create(const WeightView& w);

  absl::Status Run(const float* x, int64_t n, float* y) const override;
  std::string Name() const override;

 private:
  explicit WidenAmxMatmul(const WeightView& w, int64_t tile_rows) : w_(w), tile_rows_(tile_rows) {}
  WeightView w_;
  int64_t tile_rows_;  // weight rows per tile, a multiple of 32 (two AMX output blocks)
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_WIDEN_AMX_MATMUL_H_
