// A loaded model: its files, configuration, tokenizer and its causal LM (prepared weights).
#ifndef TEXTGEN_ENGINE_MODEL_MODEL_H_
#define TEXTGEN_ENGINE_MODEL_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/gguf_file.h"
#include "engine/format/safetensors_file.h"
#include "engine/model/llama_model.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

struct ModelOptions {
  LlamaModelOptions llama;
  // Compute threads for the ops (process-wide, see ops::SetNumThreads). 0: chosen from the
  // model's size (one thread for tiny models, where a fork/join costs more than the work).
  int threads = 0;
};

// Immutable after Load except for the forward pass (see CausalLm for its threading rule).
class Model {
 public:
  // `path` is a GGUF file or a Hugging Face directory (config.json, model.safetensors or the
  // shards listed by model.safetensors.index.json, tokenizer.json). Errors name the file and the
  // problem.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                                     const ModelOptions& options = {});

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return lm_->config(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  CausalLm& lm() { return *lm_; }
  // "gguf" or "safetensors".
  const std::string& format() const { return format_; }

 private:
  Model() = default;
  std::string path_;
  std::string format_;
  std::unique_ptr<GgufFile> gguf_;
  std::vector<std::unique_ptr<SafetensorsFile>> safetensors_;  // one file or the shards
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CausalLm> lm_;
};

// Only the tokenizer: works on vocab-only GGUF files and HF directories.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_MODEL_H_
