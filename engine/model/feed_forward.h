// A layer's feed-forward block, the part of a layer the architectures vary most: a dense
// gated FFN (DenseFfn below) or a mixture of experts (MoeFfn, moe_ffn.h). The model holds one
// per layer and calls it on the normed residual stream.
#ifndef TEXTGEN_ENGINE_MODEL_FEED_FORWARD_H_
#define TEXTGEN_ENGINE_MODEL_FEED_FORWARD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/arch.h"
#include "engine/ops/linear.h"

namespace textgen {

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x: [rows, n_embd] normed inputs; out: [rows, n_embd] the block's outputs (before the
  // residual add). Not reentrant (scratch buffers), like the model that owns it.
  virtual absl::Status Forward(const float* x, int64_t rows, float* out) = 0;
  // Appends the weights one decode step reads, in reading order (the kernel calibration
  // times these shapes).
  virtual void DecodeWeights(std::vector<ops::WeightView>* out) const = 0;
};

// gate[i] = act(gate[i], up[i]) for i < count, the FFN's gated activation (`act` as
// ArchSpec::ffn_act; gpt-oss's alpha 1.702 and limit 7 as llama.cpp hard-codes them).
void GatedActivation(FfnActivation act, float* gate, const float* up, int64_t count);

// out = W_down · act(W_gate · x, W_up · x).
class DenseFfn : public FeedForward {
 public:
  // gate, up: [n_ff, n_embd]; down: [n_embd, n_ff].
  DenseFfn(FfnActivation act, std::unique_ptr<ops::Linear> gate, std::unique_ptr<ops::Linear> up,
           std::unique_ptr<ops::Linear> down)
      : act_(act), gate_(std::move(gate)), up_(std::move(up)), down_(std::move(down)) {}

  absl::Status Forward(const float* x, int64_t rows, float* out) override;
  void DecodeWeights(std::vector<ops::WeightView>* out) const override;

 private:
  FfnActivation act_;
  std::unique_ptr<ops::Linear> gate_, up_, down_;
  std::vector<float> g_, u_;  // [rows, n_ff] scratch
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_FEED_FORWARD_H_
