// Interface of the kernels behind Linear (engine/ops/linear.h). Kernels trust their arguments;
// Linear checks them. A quantized (e.g. Q8_0) kernel plugs in by implementing this.
#ifndef TEXTGEN_ENGINE_OPS_MATMUL_KERNEL_H_
#define TEXTGEN_ENGINE_OPS_MATMUL_KERNEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace textgen::ops {

class MatmulKernel {
 public:
  virtual ~MatmulKernel() = default;
  // y[n, out] = x[n, in] · Wᵀ with n >= 1 and non-null, non-overlapping x and y.
  // Must be safe to call concurrently from several threads.
  virtual absl::Status Run(const float* x, int64_t n, float* y) const = 0;
  // Short description for logs and benchmarks, e.g. "onednn:gemm:jit".
  virtual std::string Name() const = 0;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_MATMUL_KERNEL_H_
