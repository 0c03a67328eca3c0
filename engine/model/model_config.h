// Hyperparameters of a decoder-only model (llama, qwen2, qwen3, phi3, gemma2, gemma3), read
// from GGUF metadata or a Hugging Face config.json. Every value read is type- and range-checked:
// a bad file is a status naming the key and value, never a crash.
#ifndef TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_
#define TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/model/arch.h"

namespace textgen {

// The mixture-of-experts part of a config (n_expert == 0: a dense model).
struct MoeConfig {
  int n_expert = 0;        // routed experts per layer
  int n_expert_used = 0;   // experts each token is routed to (top-k)
  int n_ff_expert = 0;     // width of each routed expert's FFN
  int n_ff_shared = 0;     // width of the shared expert (0: none)
  bool norm_topk = false;  // the k routing weights rescaled to sum to 1
  MoeGating gating = MoeGating::kSoftmax;
  FfnActivation act = FfnActivation::kSilu;  // of every expert (the shared one too)
  bool biases = false;  // router and expert biases (MoeWeights' *_bias vectors)
};

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  int n_vocab = 0;
  int n_ctx = 0;  // trained context length
  int n_embd = 0;
  int n_layers = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // n_embd / n_heads unless the file says otherwise (key_length, head_dim)
  int rope_dim = 0;  // leading dims of each head that RoPE rotates
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear RoPE scaling: 1 / factor
  // [rope_dim / 2] divisors of the RoPE frequencies (Llama 3 scaling; empty = none).
  std::vector<float> rope_freq_factors;
  // Phi-3 longrope: factors for contexts beyond n_ctx_orig (long) or within it (short), and the
  // attention factor that scales cos/sin. Chosen once per model by the served context length
  // (LongropeFactors), as llama.cpp does.
  std::vector<float> rope_factors_long, rope_factors_short;
  int n_ctx_orig = 0;  // 0 = n_ctx (longrope's and YaRN's original context)
  float rope_attn_factor = 1.0f;
  // YaRN (rope.scaling.type yarn): rope_freq_scale = 1 / factor, n_ctx_orig the original context,
  // rope_attn_factor its magnitude scale 1 + 0.1 ln(factor); ops::RopeConfig has the formula.
  bool rope_yarn = false;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  // Sliding-window layers' RoPE (Gemma 3: own base, no scaling); equal to the above otherwise.
  float rope_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  float rms_eps = 1e-5f;
  float attn_scale = 0.0f;          // score scale; 0 = 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;        // 0 = none (Gemma 2: 50)
  float final_softcap = 0.0f;       // 0 = none (Gemma 2: 30)
  int sliding_window = 0;           // slots a sliding-window layer sees (incl. itself); 0 = none
  std::vector<bool> swa_layers;     // [n_layers] true for sliding-window layers, or empty
  bool tied_embeddings = false;     // output projection reuses token_embd
  DType weight_type = DType::kF32;  // type of the projection weights as stored
  const ArchSpec* arch = nullptr;   // set by the loaders from `architecture`
  MoeConfig moe;

  bool is_moe() const { return moe.n_expert > 0; }

  bool IsSwaLayer(int layer) const {
    return sliding_window > 0 && !swa_layers.empty() && swa_layers[layer];
  }

  // InvalidArgument naming the first inconsistent field (e.g. heads not dividing n_embd).
  absl::Status Validate() const;
  std::string DebugString() const;
};

// From `general.architecture` and `<arch>.*` keys. Unknown architectures give Unimplemented
// naming the architecture. n_vocab comes from `<arch>.vocab_size` or the token list.
absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf);

// From a Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3, phi3, gemma2,
// gemma3_text). Errors name the file, the key and the offending value.
absl::StatusOr<ModelConfig> ConfigFromHfConfigJson(const std::string& path);

// The RoPE frequency divisors a model serving `n_ctx` tokens per sequence uses: the Llama 3
// factors if any; for longrope, the long factors when n_ctx > n_ctx_orig, else the short ones
// (llama.cpp's choice, made once from the context size, not per step as transformers does);
// empty for none.
const std::vector<float>& RopeFactorsFor(const ModelConfig& c, int n_ctx);

// Llama 3 rope_scaling (factor, low/high_freq_factor, original_max_position_embeddings) as
// [rope_dim / 2] frequency divisors, as llama.cpp's converter writes rope_freqs.weight.
std::vector<float> Llama3RopeFactors(float base, int rope_dim, float factor, float low_freq_factor,
                                     float high_freq_factor, int original_ctx);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_
