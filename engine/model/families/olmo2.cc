// OLMo 2 (llama.cpp's olmo2 graph): no pre-norms (the attention and the FFN read the residual
// stream itself), an RMSNorm of each token's whole q and k projection before NEOX RoPE, and an
// RMSNorm of each block's output before the residual add.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

// As in Gemma, Hugging Face's "post_attention_layernorm" is the norm on the attention output.
constexpr LayerTensorName kTensors[] = {
    kAttnQ,
    kAttnK,
    kAttnV,
    kAttnQNorm,
    kAttnKNorm,
    kAttnOut,
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    kFfnGate,
    kFfnUp,
    kFfnDown,
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};
constexpr const char* kHfTypes[] = {"olmo2"};
constexpr ArchDoc kDocs[] = {
    {.models = "OLMo 2 (1B, 7B, 13B, 32B)",
     .differs = "no pre-norms (attention and FFN read the residual stream itself), RMSNorm of "
                "each block's output before the residual add (`post_attention_norm`, "
                "`post_ffw_norm`), RMSNorm of each token's whole q and k projection (weights of "
                "`n_head * head_dim` and `n_head_kv * head_dim` entries) before NEOX RoPE; OLMo "
                "3's sliding-window layers (GGUF `olmo2` with `attention.sliding_window_pattern`) "
                "are refused"}};

}  // namespace

ArchSpec Olmo2() {
  ArchSpec a;
  a.gguf_arch = "olmo2";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.rope_neox = true;
  a.pre_norms = false;
  a.qk_norm = true;
  a.qk_norm_whole = true;
  a.post_norms = true;
  return a;
}

}  // namespace textgen::families
