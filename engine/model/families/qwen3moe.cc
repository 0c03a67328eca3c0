// Qwen3 mixture of experts (Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder): Qwen3's attention,
// routed experts of their own width, the top-k weights renormalised.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

// The dense FFN's tensors are replaced by a router and 3-D expert stacks; Hugging Face
// checkpoints hold one tensor per expert, which LayerTensorName cannot name: GGUF only.
constexpr LayerTensorName kTensors[] = {kAttnNorm,  kAttnQ,     kAttnK,   kAttnV,
                                        kAttnQNorm, kAttnKNorm, kAttnOut, kFfnNorm};
constexpr ArchDoc kDocs[] = {
    {.models = "Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B",
     .differs = "Qwen3's attention; experts of their own width (`expert_feed_forward_length`), "
                "softmax top-k renormalized",
     .gguf_only = true}};

}  // namespace

ArchSpec Qwen3Moe() {
  ArchSpec a = Qwen3();
  a.gguf_arch = "qwen3moe";
  a.hf_types = {};
  a.tensors = kTensors;
  a.docs = kDocs;
  a.moe = MoeUse::kAlways;
  a.moe_norm_topk = true;
  return a;
}

}  // namespace textgen::families
