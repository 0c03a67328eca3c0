// oneDNN matmul primitive behind Linear, for batches of rows and big weights.
//
// One primitive per weight matrix, created at load time with a run-time row count
// (DNNL_RUNTIME_DIM_VAL), so any n reuses it. Measured alternative: primitives for fixed n
// with oneDNN's blocked weight layout are ~10-25% faster at n = 128 on medium shapes, but need
// one primitive (and padding) per row-count bucket and a reordered copy of the weights.
//
// Concurrency: primitives are created with the user scratchpad mode and each call takes its
// scratchpad and stream from thread-local storage, so concurrent Run calls need no lock. (The
// default library scratchpad of this oneDNN build is shared by all primitives and only safe
// when a primitive runs on the thread that created it.)
#ifndef TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_

#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"

namespace textgen::ops {

class OneDnnMatmul final : public MatmulKernel {
 public:
  // w [out, in] row-major F32. kF32 keeps the pointer (w must outlive the object); kBf16
  // converts w into an owned BF16 copy and does not keep w. dnnl::error becomes Internal
  // (Unimplemented when oneDNN has no implementation for this CPU).
  static absl::StatusOr<std::unique_ptr<OneDnnMatmul>> Create(const float* w, int64_t out,
                                                              int64_t in, LinearCompute compute);

  absl::Status Run(const float* x, int64_t n, float* y) const override;
  std::string Name() const override { return name_; }

 private:
  OneDnnMatmul() = default;

  int64_t out_ = 0;
  int64_t in_ = 0;
  LinearCompute compute_ = LinearCompute::kF32;
  dnnl::matmul primitive_;
  dnnl::memory weights_;          // [in, out] view of W (tag ba), read-only after Create
  std::vector<uint16_t> w_bf16_;  // kBf16: owned weights [out, in]
  size_t scratchpad_bytes_ = 0;
  std::string name_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_
