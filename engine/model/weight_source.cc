#include "engine/model/weight_source.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status CheckShape(const std::string& file, const std::string& name,
                        const std::vector<int64_t>& stored, const std::vector<int64_t>& want) {
  if (stored == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(file, ": shape mismatch for tensor ", name,
                                                 ": stored ", ShapeString(stored), ", expected ",
                                                 ShapeString(want)));
}

class GgufWeightSource : public WeightSource {
 public:
  explicit GgufWeightSource(const GgufFile* gguf) : gguf_(gguf) {}

  bool Has(const std::string& name) const override { return gguf_->FindTensor(name) != nullptr; }

  absl::StatusOr<NativeTensor> LoadNative(const std::string& name,
                                          const std::vector<int64_t>& shape) const override {
    TG_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, shape));
    NativeTensor n;
    n.type = t->type;
    n.data = t->data;
    return n;
  }

 private:
  absl::StatusOr<const GgufTensorInfo*> Find(const std::string& name,
                                             const std::vector<int64_t>& shape) const {
    const GgufTensorInfo* t = gguf_->FindTensor(name);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat(gguf_->path(), ": missing tensor ", name));
    }
    // GGUF lists the fastest-varying dimension first; row-major shapes list it last.
    std::vector<int64_t> stored(t->dims.rbegin(), t->dims.rend());
    TG_RETURN_IF_ERROR(CheckShape(gguf_->path(), name, stored, shape));
    return t;
  }

  const GgufFile* gguf_;
};

// Maps GGUF tensor names to Hugging Face Llama names.
std::optional<std::string> HfName(const std::string& name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  if (parts.size() != 4 || parts[0] != "blk") return std::nullopt;
  static const std::pair<const char*, const char*> kMap[] = {
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"attn_norm", "input_layernorm"},
      {"ffn_norm", "post_attention_layernorm"},
  };
  for (const auto& [gguf, hf] : kMap) {
    if (parts[2] == gguf) return absl::StrCat("model.layers.", parts[1], ".", hf, ".", parts[3]);
  }
  return std::nullopt;
}

class HfWeightSource : public WeightSource {
 public:
  HfWeightSource(const SafetensorsFile* st, const ModelConfig& config) : st_(st), config_(config) {}

  bool Has(const std::string& name) const override { return Find(name) != nullptr; }

  absl::StatusOr<NativeTensor> LoadNative(const std::string& name,
                                          const std::vector<int64_t>& shape) const override {
    const SafetensorsTensor* t = Find(name);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat(st_->path(), ": missing tensor ", name, " (",
                                              HfName(name).value_or("?"), ")"));
    }
    TG_RETURN_IF_ERROR(CheckShape(st_->path(), name, t->shape, shape));
    NativeTensor n;
    n.type = t->type;
    n.data = t->data;
    if (const int heads = RopeHeads(name); heads > 0) {
      TG_ASSIGN_OR_RETURN(const size_t row_bytes, RowBytes(t->type, shape[1]));
      n.owned = ToInterleaved(std::vector<uint8_t>(t->data, t->data + row_bytes * shape[0]), heads,
                              static_cast<int64_t>(row_bytes));
      n.data = n.owned.data();
    }
    return n;
  }

 private:
  // Tied checkpoints store one of embed_tokens / lm_head; either serves for both names.
  const SafetensorsTensor* Find(const std::string& name) const {
    std::optional<std::string> hf = HfName(name);
    if (!hf) return nullptr;
    const SafetensorsTensor* t = st_->FindTensor(*hf);
    if (t == nullptr && name == "token_embd.weight") t = st_->FindTensor("lm_head.weight");
    if (t == nullptr && name == "output.weight" && config_.tied_embeddings) {
      t = st_->FindTensor("model.embed_tokens.weight");
    }
    return t;
  }

  // Heads of a q/k projection (rows to reorder for RoPE), 0 for other tensors.
  int RopeHeads(const std::string& name) const {
    if (name.find(".attn_q.") != std::string::npos) return config_.n_heads;
    if (name.find(".attn_k.") != std::string::npos) return config_.n_kv_heads;
    return 0;
  }

  // HF orders each head's rows for rotate-half RoPE (first half, second half); GGUF
  // interleaves them (pairs 2i, 2i+1). GGUF row 2i+j of a head is HF row j*half + i. `cols`
  // counts elements of T per row (bytes for raw rows).
  template <typename T>
  std::vector<T> ToInterleaved(const std::vector<T>& w, int n_heads, int64_t cols) const {
    const int head_dim = config_.head_dim;
    const int half = config_.rope_dim / 2;
    std::vector<T> out(w);
    for (int h = 0; h < n_heads; ++h) {
      for (int i = 0; i < half; ++i) {
        for (int j = 0; j < 2; ++j) {
          const int64_t dst = static_cast<int64_t>(h) * head_dim + 2 * i + j;
          const int64_t src = static_cast<int64_t>(h) * head_dim + j * half + i;
          std::copy_n(w.begin() + src * cols, cols, out.begin() + dst * cols);
        }
      }
    }
    return out;
  }

  const SafetensorsFile* st_;
  ModelConfig config_;
};

}  // namespace

absl::StatusOr<std::vector<float>> WeightSource::LoadF32(const std::string& name,
                                                         const std::vector<int64_t>& shape) const {
  TG_ASSIGN_OR_RETURN(NativeTensor t, LoadNative(name, shape));
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> out(static_cast<size_t>(count));
  ToF32(t.type, t.data, out.data(), count);
  return out;
}

std::unique_ptr<WeightSource> MakeGgufWeightSource(const GgufFile* gguf) {
  return std::make_unique<GgufWeightSource>(gguf);
}

std::unique_ptr<WeightSource> MakeHfWeightSource(const SafetensorsFile* st,
                                                 const ModelConfig& config) {
  return std::make_unique<HfWeightSource>(st, config);
}

}  // namespace textgen
