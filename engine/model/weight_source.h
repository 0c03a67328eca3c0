// Where weights come from: a GGUF file or a Hugging Face checkpoint, behind one interface
// that speaks GGUF tensor names and row-major [rows, cols] shapes.
#ifndef TEXTGEN_ENGINE_MODEL_WEIGHT_SOURCE_H_
#define TEXTGEN_ENGINE_MODEL_WEIGHT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/format/gguf_file.h"
#include "engine/format/safetensors_file.h"
#include "engine/model/model_config.h"

namespace textgen {

// A tensor at its stored type: `data` points into the source's mapping (valid while the source's
// file lives) or into `owned` (when rows had to be reordered). Moving keeps `data` valid.
struct NativeTensor {
  DType type = DType::kF32;
  const uint8_t* data = nullptr;
  std::vector<uint8_t> owned;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // True when the tensor named in GGUF convention (e.g. "blk.0.attn_q.weight") exists.
  virtual bool Has(const std::string& name) const = 0;
  // The tensor at its stored type, row-major with shape `shape` ([out, in] for matrices, [n]
  // for vectors). NotFound "missing tensor NAME" when absent; InvalidArgument "shape mismatch"
  // naming both shapes when the stored shape differs. Q/K projections come back in GGUF's
  // interleaved RoPE row order whatever the source for architectures with interleaved RoPE
  // (llama); NEOX architectures keep the stored order.
  virtual absl::StatusOr<NativeTensor> LoadNative(const std::string& name,
                                                  const std::vector<int64_t>& shape) const = 0;
  // One expert's [out, in] matrix (`shape`) of the expert stack `stack` (GGUF name, e.g.
  // "blk.0.ffn_gate_exps.weight", stored [n_expert, out, in]): a view into the stack for GGUF,
  // the expert's own tensor for Hugging Face checkpoints (ArchSpec::expert_tensors). Errors as
  // LoadNative's, naming the stack (GGUF) or the expert's tensor (HF).
  virtual absl::StatusOr<NativeTensor> LoadExpert(const std::string& stack, int64_t expert,
                                                  int64_t n_expert,
                                                  const std::vector<int64_t>& shape) const;
  // The same tensor converted to F32.
  absl::StatusOr<std::vector<float>> LoadF32(const std::string& name,
                                             const std::vector<int64_t>& shape) const;
  // What to add to stored RMSNorm weights to get the multiplier: 1 for Hugging Face Gemma
  // checkpoints (they store w of a (1 + w) norm), 0 otherwise (GGUF stores w + 1).
  virtual float norm_offset() const { return 0.0f; }
};

// Borrows `gguf`, which must outlive the source.
std::unique_ptr<WeightSource> MakeGgufWeightSource(const GgufFile* gguf);

// Borrows the files (one, or the shards of a model.safetensors.index.json), which must outlive
// the source; a tensor is looked up in each. `config` gives the architecture (its table of
// tensor names) and the head counts for the rotate-half → interleaved permutation of q/k rows.
std::unique_ptr<WeightSource> MakeHfWeightSource(std::vector<const SafetensorsFile*> files,
                                                 const ModelConfig& config);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_WEIGHT_SOURCE_H_
