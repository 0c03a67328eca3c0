// Qwen2 and Qwen2.5: Llama with Q/K/V biases and NEOX RoPE.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

constexpr LayerTensorName kTensors[] = {kAttnNorm,  kAttnQ,     kAttnK,     kAttnV,
                                        kAttnQBias, kAttnKBias, kAttnVBias, kAttnOut,
                                        kFfnNorm,   kFfnGate,   kFfnUp,     kFfnDown};
constexpr const char* kHfTypes[] = {"qwen2"};
constexpr ArchDoc kDocs[] = {
    {.models = "Qwen2, Qwen2.5", .differs = "Q/K/V biases, NEOX (rotate-half) RoPE"}};

}  // namespace

ArchSpec Qwen2() {
  ArchSpec a;
  a.gguf_arch = "qwen2";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.rope_neox = true;
  a.qkv_bias = true;
  return a;
}

}  // namespace textgen::families
