// Qwen3 (dense): Llama with an RMSNorm of each q and k head and NEOX RoPE.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

constexpr LayerTensorName kTensors[] = {kAttnNorm,  kAttnQ,     kAttnK,   kAttnV,
                                        kAttnQNorm, kAttnKNorm, kAttnOut, kFfnNorm,
                                        kFfnGate,   kFfnUp,     kFfnDown};
constexpr const char* kHfTypes[] = {"qwen3"};
constexpr ArchDoc kDocs[] = {
    {.models = "Qwen3 (dense)",
     .differs = "RMSNorm of each q and k head, head_dim independent of dim"}};

}  // namespace

ArchSpec Qwen3() {
  ArchSpec a;
  a.gguf_arch = "qwen3";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.rope_neox = true;
  a.qk_norm = true;
  return a;
}

}  // namespace textgen::families
