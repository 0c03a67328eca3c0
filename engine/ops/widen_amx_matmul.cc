#include "engine/ops/widen_amx_matmul.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/ops/amx_matmul.h"

namespace textgen::ops {

absl::StatusOr<std::unique_ptr<WidenAmxMatmul>> WidenAmxMatmul::Create(const WeightView& w) {
  if (!AmxBf16Matmul::Available()) {
    return absl::FailedPreconditionError("WidenAmxMatmul: this CPU or build has no AMX");
  }
  // ~256 KiB of BF16 per tile: it, its packed copy and the activations stay in L2 (2 MiB).
  const int64_t rows = std::max<int64_t>(32, (int64_t{128} << 10) / w.in / 32 * 32);
  return std::unique_ptr<WidenAmxMatmul>(new WidenAmxMatmul(w, std::min(rows, w.out)));
}

absl::Status WidenAmxMatmul::Run(const float* x, int64_t n, float* y) const {
  return AmxBf16Matmul::RunWidened(w_, tile_rows_, x, n, y);
}

std::string WidenAmxMatmul::Name() const {
  return absl::StrCat("amx:bf16:widen-", WeightTypeName(w_.type));
}

}  // namespace textgen::ops
