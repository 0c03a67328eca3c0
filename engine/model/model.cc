#include "engine/model/model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/model/weight_source.h"
#include "engine/ops/threading.h"
#include "engine/tokenizer/vocab.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace textgen {
namespace fs = std::filesystem;
namespace {

// The safetensors files of a Hugging Face directory: model.safetensors, or every shard named in
// model.safetensors.index.json's weight_map (each opened once, in order of first mention).
absl::StatusOr<std::vector<std::unique_ptr<SafetensorsFile>>> OpenSafetensors(const fs::path& dir) {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::exists(dir / "model.safetensors", ec) && fs::exists(index, ec)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index.string(), ": not a JSON object with a weight_map object"));
    }
    std::vector<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(index.string(), ": weight_map[", tensor, "] is not a file name"));
      }
      const std::string name = shard.get<std::string>();
      // Shards live beside the index; a path that leaves the directory is refused.
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat(index.string(), ": bad shard name '", name, "'"));
      }
      if (std::find(shards.begin(), shards.end(), name) == shards.end()) shards.push_back(name);
    }
    if (shards.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(index.string(), ": empty weight_map"));
    }
    for (const std::string& name : shards) {
      TG_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((dir / name).string()));
      files.push_back(std::move(f));
    }
    return files;
  }
  TG_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((dir / "model.safetensors").string()));
  files.push_back(std::move(f));
  return files;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                                   const ModelOptions& options) {
  auto m = std::unique_ptr<Model>(new Model());
  m->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    m->format_ = "safetensors";
    TG_ASSIGN_OR_RETURN(ModelConfig config,
                        ConfigFromHfConfigJson((fs::path(path) / "config.json").string()));
    TG_ASSIGN_OR_RETURN(m->safetensors_, OpenSafetensors(fs::path(path)));
    TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromHfTokenizerJson(path));
    TG_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Create(std::move(vocab)));
    std::vector<const SafetensorsFile*> files;
    for (const auto& f : m->safetensors_) {
      files.push_back(f.get());
      for (const char* probe :
           {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.qkv_proj.weight"}) {
        if (const SafetensorsTensor* q = f->FindTensor(probe)) config.weight_type = q->type;
      }
    }
    config.name = fs::path(path).filename().string();
    auto source = MakeHfWeightSource(std::move(files), config);
    TG_ASSIGN_OR_RETURN(m->lm_, LlamaModel::Create(config, *source, options.llama));
  } else {
    m->format_ = "gguf";
    TG_ASSIGN_OR_RETURN(m->gguf_, GgufFile::Open(path));
    TG_ASSIGN_OR_RETURN(ModelConfig config, ConfigFromGguf(*m->gguf_));
    if (config.name.empty()) config.name = fs::path(path).stem().string();
    TG_ASSIGN_OR_RETURN(VocabData vocab, VocabFromGguf(*m->gguf_));
    TG_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Create(std::move(vocab)));
    auto source = MakeGgufWeightSource(m->gguf_.get());
    TG_ASSIGN_OR_RETURN(m->lm_, LlamaModel::Create(config, *source, options.llama));
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
