// Llama (2, 3, 3.1-3.3), Mistral, SmolLM2, TinyLlama; Mixtral is a `llama` GGUF with experts.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

constexpr LayerTensorName kTensors[] = {
    kAttnNorm, kAttnQ,   kAttnK, kAttnV,   kAttnOut,
    kFfnNorm,  kFfnGate, kFfnUp, kFfnDown, {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"}};
// Mixtral's experts and router in Hugging Face checkpoints (MixtralForCausalLM): w1 is the gate,
// w3 the up and w2 the down projection.
constexpr LayerTensorName kMixtralExperts[] = {
    {"ffn_gate_exps.weight", "block_sparse_moe.experts.$0.w1.weight"},
    {"ffn_up_exps.weight", "block_sparse_moe.experts.$0.w3.weight"},
    {"ffn_down_exps.weight", "block_sparse_moe.experts.$0.w2.weight"},
};
constexpr const char* kHfTypes[] = {"llama", "mistral", "mixtral"};
constexpr ArchDoc kDocs[] = {
    {.models = "Llama 2, 3, 3.1, 3.2, 3.3, Mistral 7B v0.1–v0.3, SmolLM2, TinyLlama",
     .differs = "Llama 3 rope scaling (GGUF `rope_freqs.weight`, HF `rope_scaling` `llama3`), "
                "linear scaling, head_dim from `attention.key_length` / `head_dim`, tied "
                "embeddings",
     .hf = "`llama`, `mistral`"},
    {.variant = " with experts",
     .models = "Mixtral 8x7B, 8x22B",
     .differs = "mixture of experts: `ffn_gate_inp` router, `ffn_{gate,up,down}_exps` stacks of "
                "`feed_forward_length` width, softmax top-k (`expert_used_count`), the k weights "
                "renormalized; Hugging Face checkpoints with one tensor per expert",
     .hf = "`mixtral`"},
};

}  // namespace

ArchSpec Llama() {
  ArchSpec a;
  a.gguf_arch = "llama";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.expert_tensors = kMixtralExperts;
  a.moe = MoeUse::kWhenListed;  // Mixtral
  a.moe_norm_topk = true;
  a.moe_width_is_n_ff = true;
  return a;
}

}  // namespace textgen::families
