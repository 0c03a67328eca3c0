#include "engine/model/weight_source.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/substitute.h"
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

// Maps GGUF tensor names to the architecture's Hugging Face names.
std::optional<std::string> HfName(const ArchSpec& arch, const std::string& name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  std::vector<std::string> parts = absl::StrSplit(name, absl::MaxSplits('.', 2));
  if (parts.size() != 3 || parts[0] != "blk") return std::nullopt;
  for (const LayerTensorName& t : arch.tensors) {
    if (parts[2] == t.gguf) return absl::StrCat("model.layers.", parts[1], ".", t.hf);
  }
  return std::nullopt;
}

// The Hugging Face name of one expert's tensor of the GGUF stack `stack` (blk.N.<stack>).
std::optional<std::string> HfExpertName(const ArchSpec& arch, const std::string& stack,
                                        int64_t expert) {
  std::vector<std::string> parts = absl::StrSplit(stack, absl::MaxSplits('.', 2));
  if (parts.size() != 3 || parts[0] != "blk") return std::nullopt;
  for (const LayerTensorName& t : arch.expert_tensors) {
    if (parts[2] == t.gguf) {
      return absl::StrCat("model.layers.", parts[1], ".", absl::Substitute(t.hf, expert));
    }
  }
  return std::nullopt;
}

class HfWeightSource : public WeightSource {
 public:
  HfWeightSource(std::vector<const SafetensorsFile*> files, const ModelConfig& config)
      : files_(std::move(files)), config_(config) {}

  float norm_offset() const override { return config_.arch->hf_norm_plus_one ? 1.0f : 0.0f; }

  bool Has(const std::string& name) const override { return Find(name) != nullptr; }

  absl::StatusOr<NativeTensor> LoadExpert(const std::string& stack, int64_t expert,
                                          int64_t n_expert,
                                          const std::vector<int64_t>& shape) const override {
    std::optional<std::string> hf = HfExpertName(*config_.arch, stack, expert);
    const SafetensorsFile* file = nullptr;
    const SafetensorsTensor* t = hf ? FindAny(*hf, &file) : nullptr;
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat(files_.front()->path(), ": missing tensor ",
                                              hf.value_or(stack), " (expert ", expert, " of ",
                                              n_expert, ")"));
    }
    TG_RETURN_IF_ERROR(CheckShape(file->path(), *hf, t->shape, shape));
    NativeTensor n;
    n.type = t->type;
    n.data = t->data;
    return n;
  }

  absl::StatusOr<NativeTensor> LoadNative(const std::string& name,
                                          const std::vector<int64_t>& shape) const override {
    const SafetensorsFile* file = nullptr;
    const SafetensorsTensor* t = Find(name, &file);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat(files_.front()->path(), ": missing tensor ", name,
                                              " (", HfName(*config_.arch, name).value_or("?"),
                                              ")"));
    }
    TG_RETURN_IF_ERROR(CheckShape(
        file->path(), absl::StrCat(name, " (", HfName(*config_.arch, name).value_or("?"), ")"),
        t->shape, shape));
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
  const SafetensorsTensor* Find(const std::string& name,
                                const SafetensorsFile** file = nullptr) const {
    std::optional<std::string> hf = HfName(*config_.arch, name);
    if (!hf) return nullptr;
    const SafetensorsTensor* t = FindAny(*hf, file);
    if (t == nullptr && name == "token_embd.weight") t = FindAny("lm_head.weight", file);
    if (t == nullptr && name == "output.weight" && config_.tied_embeddings) {
      t = FindAny("model.embed_tokens.weight", file);
    }
    return t;
  }

  const SafetensorsTensor* FindAny(const std::string& hf, const SafetensorsFile** file) const {
    for (const SafetensorsFile* f : files_) {
      if (const SafetensorsTensor* t = f->FindTensor(hf); t != nullptr) {
        if (file != nullptr) *file = f;
        return t;
      }
    }
    return nullptr;
  }

  // Heads of a q/k projection (rows to reorder for RoPE), 0 for other tensors and for NEOX
  // architectures, which rotate halves as Hugging Face stores them.
  int RopeHeads(const std::string& name) const {
    if (config_.arch->rope_neox) return 0;
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

  std::vector<const SafetensorsFile*> files_;
  ModelConfig config_;
};

}  // namespace

absl::StatusOr<NativeTensor> WeightSource::LoadExpert(const std::string& stack, int64_t expert,
                                                      int64_t n_expert,
                                                      const std::vector<int64_t>& shape) const {
  if (shape.size() != 2 || expert < 0 || expert >= n_expert) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert ", expert, " of ", n_expert, " of ", stack, ": bad request"));
  }
  TG_ASSIGN_OR_RETURN(NativeTensor all, LoadNative(stack, {n_expert, shape[0], shape[1]}));
  TG_ASSIGN_OR_RETURN(const size_t row_bytes, RowBytes(all.type, shape[1]));
  const size_t bytes = row_bytes * static_cast<size_t>(shape[0]);
  NativeTensor one;
  one.type = all.type;
  if (all.owned.empty()) {
    one.data = all.data + static_cast<size_t>(expert) * bytes;
  } else {
    one.owned.assign(all.data + static_cast<size_t>(expert) * bytes,
                     all.data + static_cast<size_t>(expert + 1) * bytes);
    one.data = one.owned.data();
  }
  return one;
}

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

std::unique_ptr<WeightSource> MakeHfWeightSource(std::vector<const SafetensorsFile*> files,
                                                 const ModelConfig& config) {
  return std::make_unique<HfWeightSource>(std::move(files), config);
}

}  // namespace textgen
