#include "engine/model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/ops/elementwise.h"
#include "engine/util/status_macros.h"

namespace textgen {

namespace {

// x[n] = softmax(x) as ggml computes it: exp(x - max) in float, the sum in double, one
// reciprocal.
void SoftmaxInPlace(float* x, int n) {
  float max = x[0];
  for (int e = 1; e < n; ++e) max = std::max(max, x[e]);
  double sum = 0.0;
  for (int e = 0; e < n; ++e) {
    x[e] = std::exp(x[e] - max);
    sum += x[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = 0; e < n; ++e) x[e] *= inv;
}

}  // namespace

void MoeFfn::Route(const MoeConfig& config, const float* logits, int32_t* experts, float* weights) {
  const int n = config.n_expert, k = config.n_expert_used;
  // Up to 4096 experts (ModelConfig::Validate); a token's scores live on the stack. The
  // selection runs on the probabilities (kSoftmax) or on the logits themselves.
  float scores[4096];
  std::copy(logits, logits + n, scores);
  if (config.gating == MoeGating::kSoftmax) SoftmaxInPlace(scores, n);
  int32_t order[4096];
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] = scores[order[j]];
  }
  if (config.gating == MoeGating::kSoftmaxWeight) SoftmaxInPlace(weights, k);
  if (config.norm_topk) {
    double kept = 0.0;
    for (int j = 0; j < k; ++j) kept += weights[j];
    // llama.cpp clamps the sum below at 2^-14 (a half's smallest normal) before dividing.
    const float denom = std::max(static_cast<float>(kept), 6.103515625e-5f);
    for (int j = 0; j < k; ++j) weights[j] /= denom;
  }
}

void MoeFfn::DecodeWeights(std::vector<ops::WeightView>* out) const {
  // Not the router: it stays F32 with exact compute, which the calibration does not choose.
  for (int e = 0; e < config_.n_expert_used; ++e) {
    for (const auto* part : {&w_.gate, &w_.up, &w_.down}) out->push_back((*part)[e]->weights());
  }
  for (const ops::Linear* w : {w_.shared_gate.get(), w_.shared_up.get(), w_.shared_down.get()}) {
    if (w != nullptr) out->push_back(w->weights());
  }
}

absl::Status MoeFfn::Forward(const float* x, int64_t rows, float* out) {
  const int n_expert = config_.n_expert, k = config_.n_expert_used;
  const int64_t d = n_embd_, ff = config_.n_ff_expert;
  logits_.resize(rows * n_expert);
  TG_RETURN_IF_ERROR(w_.router->Forward(x, rows, logits_.data()));
  if (!w_.router_bias.empty()) ops::AddBias(logits_.data(), rows, n_expert, w_.router_bias.data());
  chosen_.resize(rows * k);
  chosen_w_.resize(rows * k);
  for (int64_t r = 0; r < rows; ++r) {
    Route(config_, &logits_[r * n_expert], &chosen_[r * k], &chosen_w_[r * k]);
  }
  // Group the slots by expert (a counting sort keeps each expert's rows in row order).
  slot_start_.assign(n_expert + 1, 0);
  for (int32_t e : chosen_) ++slot_start_[e + 1];
  for (int e = 0; e < n_expert; ++e) slot_start_[e + 1] += slot_start_[e];
  slots_.resize(rows * k);
  slot_next_.assign(slot_start_.begin(), slot_start_.end() - 1);
  for (int64_t slot = 0; slot < rows * k; ++slot) slots_[slot_next_[chosen_[slot]]++] = slot;
  // Each selected expert once, over all its rows: y[slot] = down(act(gate x, up x)), biases
  // (gpt-oss) after each projection.
  y_.resize(rows * k * d);
  for (int e = 0; e < n_expert; ++e) {
    const int64_t begin = slot_start_[e], n = slot_start_[e + 1] - begin;
    if (n == 0) continue;
    xe_.resize(n * d);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&xe_[i * d], &x[(slots_[begin + i] / k) * d], d * sizeof(float));
    }
    ge_.resize(n * ff);
    ue_.resize(n * ff);
    ye_.resize(n * d);
    TG_RETURN_IF_ERROR(w_.gate[e]->Forward(xe_.data(), n, ge_.data()));
    TG_RETURN_IF_ERROR(w_.up[e]->Forward(xe_.data(), n, ue_.data()));
    if (!w_.gate_bias.empty()) {
      ops::AddBias(ge_.data(), n, ff, &w_.gate_bias[e * ff]);
      ops::AddBias(ue_.data(), n, ff, &w_.up_bias[e * ff]);
    }
    GatedActivation(config_.act, ge_.data(), ue_.data(), n * ff);
    TG_RETURN_IF_ERROR(w_.down[e]->Forward(ge_.data(), n, ye_.data()));
    if (!w_.down_bias.empty()) ops::AddBias(ye_.data(), n, d, &w_.down_bias[e * d]);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&y_[slots_[begin + i] * d], &ye_[i * d], d * sizeof(float));
    }
  }
  // Weighted sum in slot order (llama.cpp: the weighted outputs, view 0 + view 1 + ...).
  for (int64_t r = 0; r < rows; ++r) {
    float* o = &out[r * d];
    for (int j = 0; j < k; ++j) {
      const float w = chosen_w_[r * k + j];
      const float* y = &y_[(r * k + j) * d];
      for (int64_t i = 0; i < d; ++i) {
        const float term = y[i] * w;
        o[i] = j == 0 ? term : o[i] + term;
      }
    }
  }
  if (w_.shared_down != nullptr) TG_RETURN_IF_ERROR(RunShared(x, rows, out));
  return absl::OkStatus();
}

absl::Status MoeFfn::RunShared(const float* x, int64_t rows, float* out) {
  const int64_t d = n_embd_, ff = config_.n_ff_shared;
  ge_.resize(rows * ff);
  ue_.resize(rows * ff);
  ye_.resize(rows * d);
  TG_RETURN_IF_ERROR(w_.shared_gate->Forward(x, rows, ge_.data()));
  TG_RETURN_IF_ERROR(w_.shared_up->Forward(x, rows, ue_.data()));
  GatedActivation(config_.act, ge_.data(), ue_.data(), rows * ff);
  TG_RETURN_IF_ERROR(w_.shared_down->Forward(ge_.data(), rows, ye_.data()));
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i) dot += double{x[r * d + i]} * w_.shared_gate_inp[i];
    const float gate = 1.0f / (1.0f + std::exp(-static_cast<float>(dot)));
    for (int64_t i = 0; i < d; ++i) out[r * d + i] += ye_[r * d + i] * gate;
  }
  return absl::OkStatus();
}

}  // namespace textgen
