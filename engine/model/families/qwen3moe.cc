// Qwen3 mixture of experts (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder): Qwen3's attention,
// routed experts of their own width, the top-k weights renormalised.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

// The dense FFN's tensors are replaced by a router and 3-D expert stacks (GGUF) or one tensor
// per expert (Hugging Face's Qwen3MoeForCausalLM).
constexpr LayerTensorName kTensors[] = {
    kAttnNorm, kAttnQ,     kAttnK,
    kAttnV,    kAttnQNorm, kAttnKNorm,
    kAttnOut,  kFfnNorm,   {"ffn_gate_inp.weight", "mlp.gate.weight"}};
constexpr LayerTensorName kExperts[] = {
    {"ffn_gate_exps.weight", "mlp.experts.$0.gate_proj.weight"},
    {"ffn_up_exps.weight", "mlp.experts.$0.up_proj.weight"},
    {"ffn_down_exps.weight", "mlp.experts.$0.down_proj.weight"},
};
constexpr const char* kHfTypes[] = {"qwen3_moe"};
constexpr ArchDoc kDocs[] = {
    {.models = "Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B",
     .differs = "Qwen3's attention; experts of their own width (`expert_feed_forward_length`), "
                "softmax top-k renormalized (Hugging Face: unless `norm_topk_prob` is false)"}};

}  // namespace

ArchSpec Qwen3Moe() {
  ArchSpec a = Qwen3();
  a.gguf_arch = "qwen3moe";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.expert_tensors = kExperts;
  a.moe = MoeUse::kAlways;
  a.moe_norm_topk = true;
  return a;
}

}  // namespace textgen::families
