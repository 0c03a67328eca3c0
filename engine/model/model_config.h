// Hyperparameters of a Llama-family model, read from GGUF metadata or a Hugging Face config.
#ifndef TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_
#define TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"

namespace textgen {

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
  int head_dim = 0;  // n_embd / n_heads
  int rope_dim = 0;  // leading dims of each head that RoPE rotates
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;     // output projection reuses token_embd
  DType weight_type = DType::kF32;  // type of the projection weights as stored

  // InvalidArgument naming the first inconsistent field (e.g. heads not dividing n_embd).
  absl::Status Validate() const;
  std::string DebugString() const;
};

// From `general.architecture` and `<arch>.*` keys. Unknown architectures give Unimplemented
// naming the architecture. n_vocab comes from `<arch>.vocab_size` or the token list.
absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf);

// From a Hugging Face `config.json` (model_type "llama" / LlamaForCausalLM).
absl::StatusOr<ModelConfig> ConfigFromHfConfigJson(const std::string& path);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_MODEL_CONFIG_H_
