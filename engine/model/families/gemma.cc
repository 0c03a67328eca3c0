// Gemma 2 and Gemma 3 (text): scaled embeddings, GeGLU, (1 + w) norms, a norm on each block's
// output, sliding-window layers; Gemma 2 soft-caps, Gemma 3 norms q and k heads.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

// Gemma's Hugging Face "post_attention_layernorm" is the norm on the attention output, not the
// pre-FFN norm it is in Llama: the reason each family has its own table.
constexpr LayerTensorName kTensors[] = {
    kAttnNorm,
    kAttnQ,
    kAttnK,
    kAttnV,
    kAttnQNorm,
    kAttnKNorm,
    kAttnOut,
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    kFfnGate,
    kFfnUp,
    kFfnDown,
};
constexpr const char* kGemma2Types[] = {"gemma2"};
constexpr const char* kGemma3Types[] = {"gemma3_text"};
constexpr ArchDoc kGemma2Docs[] = {
    {.models = "Gemma 2",
     .differs = "embeddings x sqrt(dim), GELU-tanh, (1 + w) norms, post-attention/post-FFN "
                "norms, attention and final soft-capping, `query_pre_attn_scalar`, "
                "sliding-window layers"}};
constexpr ArchDoc kGemma3Docs[] = {
    {.models = "Gemma 3 (text)",
     .differs = "as Gemma 2 without soft-capping, q/k norms, five sliding layers per global one "
                "with their own RoPE base"}};

ArchSpec Gemma(bool v3) {
  ArchSpec a;
  a.gguf_arch = v3 ? "gemma3" : "gemma2";
  a.hf_types = v3 ? absl::Span<const char* const>(kGemma3Types) : kGemma2Types;
  a.tensors = kTensors;
  a.docs = v3 ? absl::Span<const ArchDoc>(kGemma3Docs) : kGemma2Docs;
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

}  // namespace

ArchSpec Gemma2() { return Gemma(false); }
ArchSpec Gemma3() { return Gemma(true); }

}  // namespace textgen::families
