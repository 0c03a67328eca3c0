#include "engine/ops/gemv_matmul.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/ops/format_kernels.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_table.h"
#include "engine/ops/threading.h"

namespace textgen::ops {

const FormatMatmulEntry& GemvMatmul::Entry(int64_t n) const {
  const bool fast = compute_ == LinearCompute::kBf16;
  // The fast mode runs the level measured for this format and call shape (the highest level
  // until then); the exact mode the process's level.
  const KernelTable& k = fast ? internal::KernelsFor(w_.type, n) : internal::Kernels();
  return MatmulEntry(k, w_.type, fast, bf16_dot_in_f32_);
}

absl::Status GemvMatmul::Run(const float* x, int64_t n, float* y) const {
  // Threads once the call streams parallel_min_bytes of weights (once per 4 activation rows).
  const int64_t streamed = static_cast<int64_t>(w_.bytes()) * std::max<int64_t>(1, n / 4);
  const int threads = streamed >= parallel_min_bytes_ ? NumThreads() : 1;
  Entry(n).run(w_, x, n, y, threads);
  return absl::OkStatus();
}

std::string GemvMatmul::Name() const {
  return absl::StrCat("gemv:", WeightTypeName(w_.type), ":",
                      ActivationKindName(Entry(1).activations));
}

}  // namespace textgen::ops
