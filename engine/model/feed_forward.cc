#include "engine/model/feed_forward.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/threading.h"
#include "engine/util/status_macros.h"

namespace textgen {

void GatedActivation(FfnActivation act, float* gate, const float* up, int64_t count) {
  switch (act) {
    case FfnActivation::kSilu:
      return ops::SiluMul(gate, up, count);
    case FfnActivation::kGeluTanh:
      return ops::GeluTanhMul(gate, up, count);
    case FfnActivation::kSwigluOai:
      return ops::SwigluOaiMul(gate, up, count, /*alpha=*/1.702f, /*limit=*/7.0f);
  }
}

absl::Status DenseFfn::Forward(const float* x, int64_t rows, float* out) {
  const int64_t ff = gate_->out_features();
  g_.resize(rows * ff);
  u_.resize(rows * ff);
  TG_RETURN_IF_ERROR(gate_->Forward(x, rows, g_.data()));
  TG_RETURN_IF_ERROR(up_->Forward(x, rows, u_.data()));
  // Split by rows for prefill-sized calls; below that a fork/join costs more than the work.
  const int threads = rows >= 32 ? ops::NumThreads() : 1;
  ops::ParallelFor(rows, 1, threads, [&](int64_t r0, int64_t r1) {
    GatedActivation(act_, &g_[r0 * ff], &u_[r0 * ff], (r1 - r0) * ff);
  });
  return down_->Forward(g_.data(), rows, out);
}

void DenseFfn::DecodeWeights(std::vector<ops::WeightView>* out) const {
  for (const ops::Linear* w : {gate_.get(), up_.get(), down_.get()}) out->push_back(w->weights());
}

}  // namespace textgen
