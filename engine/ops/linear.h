// Linear: the matmul front end of the forward pass, y[n, out] = x[n, in] · Wᵀ.
//
// W is [out, in] row-major F32, as GGUF/HF store it. F16/BF16/Q8_0 tensors are dequantized
// to F32 by the caller for now; LinearOptions::compute selects exact F32 or fast BF16
// arithmetic, and quantized kernels can later plug in behind the same Forward (see
// MatmulKernel).
//
// Prepared once at load time; Forward then serves any row count n >= 1 (decode tokens of many
// sequences plus prefill chunks) without creating oneDNN primitives. Per call it picks:
//   - the direct AVX-512 kernel (single-threaded) for 1-2 rows and tiny weights, where
//     oneDNN's fixed per-call cost (~1 us) would dominate (see LinearOptions::direct_max_rows);
//   - otherwise the oneDNN matmul primitive, threaded by OpenMP (see threading.h).
//
// Thread safety: Forward is const and may be called concurrently from any threads (no lock;
// see onednn_matmul.h for how oneDNN state is kept per thread).
#ifndef TEXTGEN_ENGINE_OPS_LINEAR_H_
#define TEXTGEN_ENGINE_OPS_LINEAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"

namespace textgen::ops {

class Linear {
 public:
  // w [out, in] row-major. Unless options.copy_weights (or compute == kBf16), Linear keeps the
  // pointer and w must outlive it. InvalidArgument for null w, out/in < 1, or kDirect with
  // kBf16; Internal/Unimplemented when oneDNN cannot build the primitive.
  static absl::StatusOr<std::unique_ptr<Linear>> Create(const float* w, int64_t out, int64_t in,
                                                        const LinearOptions& options = {});

  // x [n, in] -> y [n, out], n >= 1; x and y must not overlap. InvalidArgument on bad
  // arguments, Internal if oneDNN fails.
  absl::Status Forward(const float* x, int64_t n, float* y) const;

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  const LinearOptions& options() const { return options_; }
  // Name of the kernel Forward would use for n rows right now, e.g. "direct:f32".
  std::string KernelName(int64_t n) const;

 private:
  Linear(int64_t out, int64_t in, const LinearOptions& options)
      : out_(out), in_(in), options_(options) {}
  const MatmulKernel& Pick(int64_t n) const;

  int64_t out_;
  int64_t in_;
  LinearOptions options_;
  std::vector<float> owned_;              // copy_weights: W [out, in]
  std::unique_ptr<MatmulKernel> direct_;  // null when not usable (kBf16 or kOneDnn)
  std::unique_ptr<MatmulKernel> onednn_;  // null only with kernel == kDirect
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_LINEAR_H_
