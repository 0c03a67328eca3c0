// gpt-oss (llama.cpp's openai-moe graph): attention with Q/K/V/O biases and sinks, sliding
// window on every other layer (from layer 0), YaRN RoPE (read from the rope.scaling keys),
// experts with biases, top-k by raw logit then a softmax over the k, the clamped SwiGLU.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

// The pre-FFN norm is called post_attention_norm in GGUF. Hugging Face checkpoints fuse the
// experts (mlp.experts.gate_up_proj): GGUF only.
constexpr LayerTensorName kTensors[] = {
    kAttnNorm,
    kAttnQ,
    kAttnK,
    kAttnV,
    kAttnQBias,
    kAttnKBias,
    kAttnVBias,
    kAttnOut,
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_sinks.weight", "self_attn.sinks"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
};
constexpr ArchDoc kDocs[] = {
    {.models = "gpt-oss (checked on F32 experts and on MXFP4 experts, as real gpt-oss GGUFs "
               "store them: `llama-quantize`'s MXFP4_MOE)",
     .differs = "mixture of experts with router and expert biases, top-k by raw logit then a "
                "softmax over the k (`SOFTMAX_WEIGHT`), clamped SwiGLU `x sigmoid(1.702 x) (y + "
                "1)` (x <= 7, \\|y\\| <= 7); attention sinks (one softmax-denominator logit per "
                "head); Q/K/V/O biases; sliding window on even layers; YaRN RoPE (ramp between "
                "interpolated and extrapolated angles, cos/sin x (1 + 0.1 ln factor)); FFN norm "
                "named `post_attention_norm`; NEOX RoPE",
     .gguf_only = true}};

}  // namespace

ArchSpec GptOss() {
  ArchSpec a;
  a.gguf_arch = "gpt-oss";
  a.hf_types = {};
  a.tensors = kTensors;
  a.docs = kDocs;
  a.rope_neox = true;
  a.qkv_bias = true;
  a.out_bias = true;
  a.attn_sinks = true;
  a.ffn_norm = "post_attention_norm.weight";
  a.ffn_act = FfnActivation::kSwigluOai;
  a.swa_period = 2;
  a.reads_window = true;
  a.moe = MoeUse::kAlways;
  a.moe_gating = MoeGating::kSoftmaxWeight;
  a.moe_biases = true;
  return a;
}

}  // namespace textgen::families
