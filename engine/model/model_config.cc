#include "engine/model/model_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

// Reads an integer hyperparameter; absent keys give `fallback` when it is >= 0.
absl::StatusOr<int> GetIntKey(const GgufFile& gguf, const std::string& key, int fallback = -1) {
  if (!gguf.Has(key)) {
    if (fallback >= 0) return fallback;
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": missing metadata key ", key));
  }
  TG_ASSIGN_OR_RETURN(uint64_t v, gguf.GetUint(key));
  if (v > (1u << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": ", key, " = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<float> GetFloatKey(const GgufFile& gguf, const std::string& key, float fallback) {
  if (!gguf.Has(key)) return fallback;
  TG_ASSIGN_OR_RETURN(double v, gguf.GetFloat(key));
  return static_cast<float>(v);
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", what, " (", DebugString(), ")"));
  };
  if (n_vocab <= 0) return bad("vocab size must be positive");
  if (n_embd <= 0 || n_layers <= 0 || n_ff <= 0) return bad("dimensions must be positive");
  if (n_heads <= 0 || n_embd % n_heads != 0) return bad("head count must divide n_embd");
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return bad("KV head count must divide head count");
  }
  if (head_dim != n_embd / n_heads) return bad("head_dim must be n_embd / n_heads");
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    return bad("RoPE dimension count must be even and at most head_dim");
  }
  if (n_ctx <= 0) return bad("context length must be positive");
  if (!(rms_eps > 0.0f) || !std::isfinite(rope_base) || rope_base <= 0.0f) {
    return bad("rms epsilon and RoPE base must be positive");
  }
  return absl::OkStatus();
}

std::string ModelConfig::DebugString() const {
  return absl::StrFormat(
      "arch=%s vocab=%d ctx=%d embd=%d layers=%d ff=%d heads=%d kv_heads=%d head_dim=%d "
      "rope_dim=%d rope_base=%g rms_eps=%g tied=%d weights=%s",
      architecture, n_vocab, n_ctx, n_embd, n_layers, n_ff, n_heads, n_kv_heads, head_dim, rope_dim,
      rope_base, rms_eps, tied_embeddings ? 1 : 0, DTypeName(weight_type));
}

absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  TG_ASSIGN_OR_RETURN(c.architecture, gguf.GetString("general.architecture"));
  if (c.architecture != "llama") {
    return absl::UnimplementedError(absl::StrCat("GGUF ", gguf.path(), ": unknown architecture '",
                                                 c.architecture, "' (supported: llama)"));
  }
  if (gguf.Has("general.name")) {
    TG_ASSIGN_OR_RETURN(c.name, gguf.GetString("general.name"));
  }
  const std::string a = c.architecture + ".";
  TG_ASSIGN_OR_RETURN(c.n_ctx, GetIntKey(gguf, a + "context_length"));
  TG_ASSIGN_OR_RETURN(c.n_embd, GetIntKey(gguf, a + "embedding_length"));
  TG_ASSIGN_OR_RETURN(c.n_layers, GetIntKey(gguf, a + "block_count"));
  TG_ASSIGN_OR_RETURN(c.n_ff, GetIntKey(gguf, a + "feed_forward_length"));
  TG_ASSIGN_OR_RETURN(c.n_heads, GetIntKey(gguf, a + "attention.head_count"));
  TG_ASSIGN_OR_RETURN(c.n_kv_heads, GetIntKey(gguf, a + "attention.head_count_kv", c.n_heads));
  c.head_dim = c.n_heads > 0 ? c.n_embd / c.n_heads : 0;
  TG_ASSIGN_OR_RETURN(c.rope_dim, GetIntKey(gguf, a + "rope.dimension_count", c.head_dim));
  TG_ASSIGN_OR_RETURN(c.rope_base, GetFloatKey(gguf, a + "rope.freq_base", 10000.0f));
  TG_ASSIGN_OR_RETURN(c.rms_eps, GetFloatKey(gguf, a + "attention.layer_norm_rms_epsilon", 1e-5f));
  int vocab_from_tokens = 0;
  if (gguf.Has("tokenizer.ggml.tokens")) {
    const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
    vocab_from_tokens = static_cast<int>(tokens->array.size());
  }
  TG_ASSIGN_OR_RETURN(c.n_vocab, GetIntKey(gguf, a + "vocab_size", vocab_from_tokens));
  c.tied_embeddings = gguf.FindTensor("output.weight") == nullptr;
  if (const GgufTensorInfo* q = gguf.FindTensor("blk.0.attn_q.weight"); q != nullptr) {
    c.weight_type = q->type;
  }
  TG_RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<ModelConfig> ConfigFromHfConfigJson(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  ModelConfig c;
  c.architecture = j.value("model_type", std::string());
  if (c.architecture != "llama") {
    return absl::UnimplementedError(
        absl::StrCat(path, ": unknown architecture '", c.architecture, "' (supported: llama)"));
  }
  auto get_int = [&](const char* key, int fallback) -> absl::StatusOr<int> {
    if (!j.contains(key) || j[key].is_null()) {
      if (fallback >= 0) return fallback;
      return absl::InvalidArgumentError(absl::StrCat(path, ": missing ", key));
    }
    if (!j[key].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " is not an integer"));
    }
    int64_t v = j[key].get<int64_t>();
    if (v < 0 || v > (1 << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " out of range"));
    }
    return static_cast<int>(v);
  };
  auto get_float = [&](const char* key, float fallback) -> float {
    return j.contains(key) && j[key].is_number() ? j[key].get<float>() : fallback;
  };
  TG_ASSIGN_OR_RETURN(c.n_vocab, get_int("vocab_size", -1));
  TG_ASSIGN_OR_RETURN(c.n_ctx, get_int("max_position_embeddings", 2048));
  TG_ASSIGN_OR_RETURN(c.n_embd, get_int("hidden_size", -1));
  TG_ASSIGN_OR_RETURN(c.n_layers, get_int("num_hidden_layers", -1));
  TG_ASSIGN_OR_RETURN(c.n_ff, get_int("intermediate_size", -1));
  TG_ASSIGN_OR_RETURN(c.n_heads, get_int("num_attention_heads", -1));
  TG_ASSIGN_OR_RETURN(c.n_kv_heads, get_int("num_key_value_heads", c.n_heads));
  c.head_dim = c.n_heads > 0 ? c.n_embd / c.n_heads : 0;
  c.rope_dim = c.head_dim;
  c.rope_base = get_float("rope_theta", 10000.0f);
  c.rms_eps = get_float("rms_norm_eps", 1e-6f);
  c.tied_embeddings = j.value("tie_word_embeddings", false);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    return absl::UnimplementedError(absl::StrCat(path, ": rope_scaling is not supported"));
  }
  TG_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace textgen
