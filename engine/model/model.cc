#include "engine/model/model.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/model/weight_source.h"
#include "engine/ops/threading.h"
#include "engine/tokenizer/vocab.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                                   const ModelOptions& options) {
  auto m = std::unique_ptr<Model>(new Model());
  m->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    m->format_ = "safetensors";
    TG_ASSIGN_OR_RETURN(ModelConfig config,
                        ConfigFromHfConfigJson((fs::path(path) / "config.json").string()));
    TG_ASSIGN_OR_RETURN(m->safetensors_,
                        SafetensorsFile::Open((fs::path(path) / "model.safetensors").string()));
    TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromHfTokenizerJson(path));
    TG_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Create(std::move(vocab)));
    if (const SafetensorsTensor* q =
            m->safetensors_->FindTensor("model.layers.0.self_attn.q_proj.weight")) {
      config.weight_type = q->type;
    }
    config.name = fs::path(path).filename().string();
    auto source = MakeHfWeightSource(m->safetensors_.get(), config);
    TG_ASSIGN_OR_RETURN(m->llama_, LlamaModel::Create(config, *source, options.llama));
  } else {
    m->format_ = "gguf";
    TG_ASSIGN_OR_RETURN(m->gguf_, GgufFile::Open(path));
    TG_ASSIGN_OR_RETURN(ModelConfig config, ConfigFromGguf(*m->gguf_));
    if (config.name.empty()) config.name = fs::path(path).stem().string();
    TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromGguf(*m->gguf_));
    TG_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Create(std::move(vocab)));
    auto source = MakeGgufWeightSource(m->gguf_.get());
    TG_ASSIGN_OR_RETURN(m->llama_, LlamaModel::Create(config, *source, options.llama));
  }
  if (m->tokenizer_->vocab_size() != m->config().n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tokenizer has ", m->tokenizer_->vocab_size(),
                     " tokens but the model's vocabulary is ", m->config().n_vocab));
  }
  const ModelConfig& c = m->config();
  const int64_t largest_weight =
      std::max<int64_t>(int64_t{c.n_vocab} * c.n_embd, int64_t{c.n_ff} * c.n_embd);
  ops::SetNumThreads(options.threads > 0 ? options.threads
                                         : ops::RecommendedNumThreads(largest_weight));
  spdlog::debug("loaded {}: {}", path, m->config().DebugString());
  return m;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromHfTokenizerJson(path));
    return Tokenizer::Create(std::move(vocab));
  }
  TG_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));
  TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromGguf(*gguf));
  return Tokenizer::Create(std::move(vocab));
}

}  // namespace textgen
