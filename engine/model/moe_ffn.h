// A mixture-of-experts feed-forward layer (Mixtral, Qwen2-MoE, Qwen3-MoE, gpt-oss): a router
// picks, for each token, k experts (MoeGating: by softmax probability, or by raw logit with a
// softmax over the k); the token's output is the weighted sum of those experts' gated FFNs
// (MoeConfig::act; gpt-oss adds biases to the router and to each expert's projections), plus,
// for Qwen2-MoE, a shared expert scaled by a sigmoid gate. Semantics as llama.cpp's
// build_moe_ffn.
//
// Cost: each step runs only the selected experts, and an expert chosen by several tokens of
// the step runs once over all of them (its weights are read once per step: a grouped matmul).
// Batch invariance: a token's experts and weights depend on its own router logits only, each
// expert computes a row as the Linear's row kernels do (independent of the other rows when the
// Linear is batch-invariant), and the k outputs are summed in the token's slot order, not in
// the order the experts ran.
#ifndef TEXTGEN_ENGINE_MODEL_MOE_FFN_H_
#define TEXTGEN_ENGINE_MODEL_MOE_FFN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/feed_forward.h"
#include "engine/model/model_config.h"
#include "engine/ops/linear.h"

namespace textgen {

struct MoeWeights {
  std::unique_ptr<ops::Linear> router;                 // [n_expert, n_embd]
  std::vector<std::unique_ptr<ops::Linear>> gate, up;  // per expert [n_ff_expert, n_embd]
  std::vector<std::unique_ptr<ops::Linear>> down;      // per expert [n_embd, n_ff_expert]
  // The shared expert (Qwen2-MoE) or null: [n_ff_shared, n_embd] x2, [n_embd, n_ff_shared].
  std::unique_ptr<ops::Linear> shared_gate, shared_up, shared_down;
  std::vector<float> shared_gate_inp;  // [n_embd]: sigmoid(shared_gate_inp . x) scales it
  // Biases when MoeConfig::biases (gpt-oss), else empty: the router's [n_expert], added to its
  // logits; per expert [n_expert, n_ff_expert] after gate and up, [n_expert, n_embd] after down
  // (before the routing weight multiplies).
  std::vector<float> router_bias, gate_bias, up_bias, down_bias;
};

class MoeFfn : public FeedForward {
 public:
  MoeFfn(const MoeConfig& config, int64_t n_embd, MoeWeights weights)
      : config_(config), n_embd_(n_embd), w_(std::move(weights)) {}

  // x: [rows, n_embd] normed inputs; out: [rows, n_embd] the layer's outputs (before the
  // residual add). Not reentrant (scratch buffers), like the model that owns it.
  absl::Status Forward(const float* x, int64_t rows, float* out) override;
  // The router and k experts' matrices (which k does not matter: they share one shape).
  void DecodeWeights(std::vector<ops::WeightView>* out) const override;

  // One token's routing from its [n_expert] router logits (biases included): the k best
  // experts, highest first (ties: the lower index), into `experts` [k], and their weights into
  // `weights` [k]. kSoftmax: the best by softmax probability, weighted by it (rescaled to sum
  // to 1 when config.norm_topk); kSoftmaxWeight: the k highest logits, weighted by a softmax
  // over those k (llama.cpp's SOFTMAX_WEIGHT).
  static void Route(const MoeConfig& config, const float* logits, int32_t* experts, float* weights);

  const MoeWeights& weights() const { return w_; }

 private:
  // out += sigmoid(shared_gate_inp . x) * shared expert(x), row by row.
  absl::Status RunShared(const float* x, int64_t rows, float* out);

  MoeConfig config_;
  int64_t n_embd_;
  MoeWeights w_;
  // Scratch, reused across calls.
  std::vector<float> logits_;        // [rows, n_expert]
  std::vector<int32_t> chosen_;      // [rows, k] expert of each slot
  std::vector<float> chosen_w_;      // [rows, k] its weight
  std::vector<int64_t> slots_;       // slot indices (row * k + j) grouped by expert
  std::vector<int64_t> slot_start_;  // [n_expert + 1] offsets into slots_
  std::vector<int64_t> slot_next_;   // [n_expert] the counting sort's write positions
  std::vector<float> xe_;            // [n_e, n_embd] the rows routed to one expert
  std::vector<float> ge_, ue_;       // [n_e, n_ff] gate and up
  std::vector<float> ye_;            // [n_e, n_embd] the expert's outputs
  std::vector<float> y_;             // [rows, k, n_embd] each slot's expert output
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_MOE_FFN_H_
