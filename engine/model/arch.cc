#include "engine/model/arch.h"

#include "absl/strings/str_join.h"

namespace textgen {
namespace {

#define TG_ATTN_QKV                                                                             \
  {"attn_q.weight", "self_attn.q_proj.weight"}, {"attn_k.weight", "self_attn.k_proj.weight"}, { \
    "attn_v.weight", "self_attn.v_proj.weight"                                                  \
  }
#define TG_FFN                                                                            \
  {"ffn_gate.weight", "mlp.gate_proj.weight"}, {"ffn_up.weight", "mlp.up_proj.weight"}, { \
    "ffn_down.weight", "mlp.down_proj.weight"                                             \
  }

constexpr LayerTensorName kLlamaTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    TG_FFN,
};

constexpr LayerTensorName kQwen2Tensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    TG_FFN,
};

constexpr LayerTensorName kQwen3Tensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    TG_FFN,
};

constexpr LayerTensorName kPhi3Tensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_up.weight", "mlp.gate_up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

// Gemma's Hugging Face "post_attention_layernorm" is the norm on the attention output, not the
// pre-FFN norm it is in Llama: the reason each architecture has its own table.
constexpr LayerTensorName kGemmaTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    TG_FFN,
};
// Mixture-of-experts layers: the dense FFN's tensors are replaced by a router and 3-D expert
// stacks; Hugging Face checkpoints hold one tensor per expert, which this table cannot name yet,
// so these have no Hugging Face names.
constexpr LayerTensorName kQwen3MoeTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
};

constexpr LayerTensorName kQwen2MoeTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
};

// gpt-oss: the attention has biases and sinks; the pre-FFN norm is called post_attention_norm
// in GGUF. Its Hugging Face checkpoints fuse the experts (mlp.experts.gate_up_proj): no names.
constexpr LayerTensorName kGptOssTensors[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    TG_ATTN_QKV,
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_sinks.weight", "self_attn.sinks"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
};

#undef TG_ATTN_QKV
#undef TG_FFN

constexpr const char* kLlamaTypes[] = {"llama", "mistral"};
constexpr const char* kQwen2Types[] = {"qwen2"};
constexpr const char* kQwen3Types[] = {"qwen3"};
constexpr const char* kPhi3Types[] = {"phi3"};
constexpr const char* kGemma2Types[] = {"gemma2"};
constexpr const char* kGemma3Types[] = {"gemma3_text"};

ArchSpec Llama() {
  ArchSpec a;
  a.gguf_arch = "llama";
  a.hf_types = kLlamaTypes;
  a.tensors = kLlamaTensors;
  a.moe = MoeUse::kWhenListed;  // Mixtral
  a.moe_norm_topk = true;
  a.moe_width_is_n_ff = true;
  return a;
}

ArchSpec Qwen2() {
  ArchSpec a;
  a.gguf_arch = "qwen2";
  a.hf_types = kQwen2Types;
  a.tensors = kQwen2Tensors;
  a.rope_neox = true;
  a.qkv_bias = true;
  return a;
}

ArchSpec Qwen3() {
  ArchSpec a;
  a.gguf_arch = "qwen3";
  a.hf_types = kQwen3Types;
  a.tensors = kQwen3Tensors;
  a.rope_neox = true;
  a.qk_norm = true;
  return a;
}

ArchSpec Phi3() {
  ArchSpec a;
  a.gguf_arch = "phi3";
  a.hf_types = kPhi3Types;
  a.tensors = kPhi3Tensors;
  a.rope_neox = true;
  a.fused_qkv = true;
  a.fused_gate_up = true;
  a.reads_longrope = true;
  return a;
}

ArchSpec Gemma(bool v3) {
  ArchSpec a;
  a.gguf_arch = v3 ? "gemma3" : "gemma2";
  a.hf_types = v3 ? absl::Span<const char* const>(kGemma3Types) : kGemma2Types;
  a.tensors = kGemmaTensors;
  a.rope_neox = true;
  a.qk_norm = v3;
  a.post_norms = true;
  a.embed_scale = true;
  a.hf_norm_plus_one = true;
  a.ffn_act = FfnActivation::kGeluTanh;
  a.swa_period = v3 ? 6 : 2;
  a.reads_softcap = !v3;
  a.reads_window = true;
  a.reads_swa_rope_base = v3;
  a.gemma_query_scale = true;
  return a;
}

ArchSpec Qwen3Moe() {
  ArchSpec a = Qwen3();
  a.gguf_arch = "qwen3moe";
  a.hf_types = {};
  a.tensors = kQwen3MoeTensors;
  a.moe = MoeUse::kAlways;
  a.moe_norm_topk = true;
  return a;
}

ArchSpec Qwen2Moe() {
  ArchSpec a = Qwen2();
  a.gguf_arch = "qwen2moe";
  a.hf_types = {};
  a.tensors = kQwen2MoeTensors;
  a.moe = MoeUse::kAlways;
  a.moe_shared_expert = true;
  return a;
}

// gpt-oss (llama.cpp's openai-moe graph): attention with Q/K/V/O biases and sinks, sliding
// window on every other layer (from layer 0), YaRN RoPE (read from the rope.scaling keys),
// experts with biases, top-k by raw logit then a softmax over the k, the clamped SwiGLU.
ArchSpec GptOss() {
  ArchSpec a;
  a.gguf_arch = "gpt-oss";
  a.hf_types = {};
  a.tensors = kGptOssTensors;
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

const ArchSpec* Table(size_t* n) {
  static const ArchSpec kArchs[] = {Llama(),     Qwen2(),    Qwen3(),    Phi3(),  Gemma(false),
                                    Gemma(true), Qwen3Moe(), Qwen2Moe(), GptOss()};
  *n = sizeof(kArchs) / sizeof(kArchs[0]);
  return kArchs;
}

}  // namespace

const ArchSpec* FindArchByGguf(std::string_view name) {
  size_t n;
  const ArchSpec* t = Table(&n);
  for (size_t i = 0; i < n; ++i) {
    if (name == t[i].gguf_arch) return &t[i];
  }
  return nullptr;
}

const ArchSpec* FindArchByHfType(std::string_view model_type) {
  size_t n;
  const ArchSpec* t = Table(&n);
  for (size_t i = 0; i < n; ++i) {
    for (const char* type : t[i].hf_types) {
      if (model_type == type) return &t[i];
    }
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  size_t n;
  const ArchSpec* t = Table(&n);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(t[i].gguf_arch);
  return absl::StrJoin(names, ", ");
}

}  // namespace textgen
