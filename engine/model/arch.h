// One table per model architecture: what the single causal-LM forward pass (LlamaModel) must do
// differently for it, the names of its tensors in GGUF and Hugging Face checkpoints, and its
// row of the docs' model table. Each family's table is built in its own file under
// engine/model/families/; arch.cc is the registry the loader, the tools and the docs read.
// Adding an architecture is a new family file and one line in the registry (plus a forward-pass
// capability when it is the first to need one, and a reference test), not a new forward pass.
#ifndef TEXTGEN_ENGINE_MODEL_ARCH_H_
#define TEXTGEN_ENGINE_MODEL_ARCH_H_

#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace textgen {

// A per-layer tensor: its GGUF name after "blk.N." and its Hugging Face name after
// "model.layers.N.".
struct LayerTensorName {
  const char* gguf;
  const char* hf;
};

// The gated FFN's activation: silu(g) u (SwiGLU), gelu_tanh(g) u (GeGLU), or gpt-oss's clamped
// SwiGLU g' sigmoid(1.702 g') (u' + 1), g' = min(g, 7), u' = clamp(u, -7, 7) (llama.cpp's
// swiglu_oai, whose alpha and limit it hard-codes: the GGUF holds no key for them).
enum class FfnActivation { kSilu, kGeluTanh, kSwigluOai };

// How the router's logits become the k experts and their weights (llama.cpp's gating
// functions): kSoftmax: softmax over all experts, the k most probable; kSoftmaxWeight: the k
// highest logits, then a softmax over those k only (gpt-oss).
enum class MoeGating { kSoftmax, kSoftmaxWeight };

// Mixture of experts in the feed-forward layers: none, when the file lists experts
// (`<arch>.expert_count` > 0: Mixtral in the `llama` architecture), or always.
enum class MoeUse { kNone, kWhenListed, kAlways };

// One row of the docs' model table (docs/models.md, written by `textgen-run
// --list-architectures`): "`gguf_arch`<variant> / <HF types>", the models, what differs from
// Llama. Markdown.
struct ArchDoc {
  const char* variant = "";  // e.g. " with experts" for a second row of one architecture
  const char* models = "";   // the published models it runs
  const char* differs = "";  // what differs from Llama
  bool gguf_only = false;    // no Hugging Face checkpoint of this row is read
  const char* hf = nullptr;  // the HF column's text when not the spec's hf_types
};

struct ArchSpec {
  const char* gguf_arch;                      // general.architecture
  absl::Span<const char* const> hf_types;     // config.json model_type values
  absl::Span<const LayerTensorName> tensors;  // every per-layer tensor the arch may have
  absl::Span<const ArchDoc> docs;             // its rows of the docs' model table
  // Mixture of experts in Hugging Face checkpoints: one tensor per expert. `gguf` names the
  // 3-D stack after "blk.N." (ffn_gate_exps.weight); `hf` the expert's tensor after
  // "model.layers.N.", with $0 for the expert's index (mlp.experts.$0.gate_proj.weight).
  absl::Span<const LayerTensorName> expert_tensors;
  // RoPE pairs (i, i + d/2) on q/k rows as Hugging Face stores them (llama.cpp's NEOX). false:
  // GGUF's interleaved pairs (2i, 2i+1), which Hugging Face Llama rows are permuted into.
  bool rope_neox = false;
  bool qkv_bias = false;    // attn_q/k/v.bias
  bool out_bias = false;    // attn_output.bias
  bool attn_sinks = false;  // attn_sinks: one softmax-denominator logit per query head
  // RMSNorms before the attention and the FFN (attn_norm, ffn_norm). OLMo 2 has none: its
  // blocks read the residual stream itself, and only their outputs are normed (post_norms).
  bool pre_norms = true;
  // The GGUF name of the pre-FFN RMSNorm after "blk.N." (gpt-oss: post_attention_norm.weight,
  // which is Gemma's post-attention norm; see post_norms).
  const char* ffn_norm = "ffn_norm.weight";
  bool qk_norm = false;        // RMSNorm of each q and k head before RoPE
  bool qk_norm_whole = false;  // ... of each token's whole q and k instead (OLMo 2)
  bool fused_qkv = false;      // attn_qkv [q; k; v rows] instead of attn_q, attn_k, attn_v
  bool fused_gate_up = false;  // ffn_up [gate; up rows], no ffn_gate
  bool post_norms = false;     // post_attention_norm / post_ffw_norm on each block's output
  bool embed_scale = false;    // embeddings x sqrt(n_embd)
  // Hugging Face stores RMSNorm weights as w for a (1 + w) norm; GGUF already holds w + 1.
  bool hf_norm_plus_one = false;
  FfnActivation ffn_act = FfnActivation::kSilu;
  // Sliding-window layers: every layer l with l % period < period - 1 (llama.cpp's
  // set_swa_pattern) when the config has a window but no per-layer list; 0 = no SWA layers.
  int swa_period = 0;
  // Hyperparameters read besides the common ones (model_config.cc): soft-capping, window, a
  // separate RoPE base for the local layers, longrope factors.
  bool reads_softcap = false;
  bool reads_window = false;
  bool reads_swa_rope_base = false;
  bool reads_longrope = false;
  bool gemma_query_scale = false;  // attention scale from query_pre_attn_scalar
  // Mixture of experts (engine/model/moe_ffn.h): routed experts replace the dense FFN.
  MoeUse moe = MoeUse::kNone;
  bool moe_norm_topk = false;      // the k routing weights rescaled to sum to 1
  bool moe_shared_expert = false;  // plus a shared expert scaled by sigmoid(gate . x)
  MoeGating moe_gating = MoeGating::kSoftmax;
  // Biases on the router (ffn_gate_inp.bias) and on every expert's gate, up and down
  // projections (ffn_{gate,up,down}_exps.bias), gpt-oss.
  bool moe_biases = false;
  // Expert width when `expert_feed_forward_length` is absent: feed_forward_length (true,
  // Mixtral) or feed_forward_length / expert_used_count (llama.cpp's fallback for Qwen MoE).
  bool moe_width_is_n_ff = false;
};

// Every registered architecture, in the docs' order.
absl::Span<const ArchSpec> AllArchitectures();
// The table for a GGUF general.architecture, or nullptr.
const ArchSpec* FindArchByGguf(std::string_view name);
// The table for a config.json model_type, or nullptr.
const ArchSpec* FindArchByHfType(std::string_view model_type);
// "llama, qwen2, ..." for error messages.
std::string SupportedArchitectures();
// The docs' model table (Markdown, one row per ArchDoc of every architecture, header included).
std::string ArchitectureTable();

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_ARCH_H_
