// Qwen1.5-MoE and Qwen2-57B-A14B: Qwen2's attention, routed experts whose top-k weights are
// not renormalised, and a shared expert with its own sigmoid gate.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

constexpr LayerTensorName kTensors[] = {kAttnNorm,  kAttnQ,     kAttnK,   kAttnV,  kAttnQBias,
                                        kAttnKBias, kAttnVBias, kAttnOut, kFfnNorm};
constexpr ArchDoc kDocs[] = {
    {.models = "Qwen1.5-MoE, Qwen2-57B-A14B",
     .differs = "Qwen2's attention (Q/K/V biases); routed experts, softmax top-k **not** "
                "renormalized, plus a shared expert (`*_shexp`, "
                "`expert_shared_feed_forward_length`) scaled by `sigmoid(ffn_gate_inp_shexp . x)`",
     .gguf_only = true}};

}  // namespace

ArchSpec Qwen2Moe() {
  ArchSpec a = Qwen2();
  a.gguf_arch = "qwen2moe";
  a.hf_types = {};
  a.tensors = kTensors;
  a.docs = kDocs;
  a.moe = MoeUse::kAlways;
  a.moe_shared_expert = true;
  return a;
}

}  // namespace textgen::families
