#include "engine/ops/linear.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/ops/direct_matmul.h"
#include "engine/ops/onednn_matmul.h"
#include "engine/ops/threading.h"
#include "engine/util/status_macros.h"

namespace textgen::ops {

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(const float* w, int64_t out, int64_t in,
                                                       const LinearOptions& options) {
  if (w == nullptr) return absl::InvalidArgumentError("Linear: null weights");
  if (out < 1 || in < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: bad shape [", out, ", ", in, "]"));
  }
  const bool f32 = options.compute == LinearCompute::kF32;
  if (!f32 && options.kernel == LinearKernel::kDirect) {
    return absl::InvalidArgumentError("Linear: the direct kernel supports F32 compute only");
  }
  auto linear = std::unique_ptr<Linear>(new Linear(out, in, options));
  const float* weights = w;
  if (f32 && options.copy_weights) {
    linear->owned_.assign(w, w + out * in);
    weights = linear->owned_.data();
  }
  if (f32 && options.kernel != LinearKernel::kOneDnn) {
    linear->direct_ = std::make_unique<DirectMatmul>(weights, out, in);
  }
  if (options.kernel != LinearKernel::kDirect) {
    TG_ASSIGN_OR_RETURN(linear->onednn_, OneDnnMatmul::Create(weights, out, in, options.compute));
  }
  return linear;
}

const MatmulKernel& Linear::Pick(int64_t n) const {
  if (direct_ == nullptr) return *onednn_;
  if (onednn_ == nullptr) return *direct_;
  const bool direct_ok = out_ * in_ <= options_.direct_max_weight_elems || NumThreads() == 1;
  return n <= options_.direct_max_rows && direct_ok ? *direct_ : *onednn_;
}

absl::Status Linear::Forward(const float* x, int64_t n, float* y) const {
  if (x == nullptr || y == nullptr) return absl::InvalidArgumentError("Linear: null buffer");
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("Linear: n = ", n, " < 1"));
  return Pick(n).Run(x, n, y);
}

std::string Linear::KernelName(int64_t n) const { return Pick(n).Name(); }

}  // namespace textgen::ops
