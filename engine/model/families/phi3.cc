// Phi-3 and Phi-3.5 mini: fused projections, longrope.
#include "engine/model/families/families.h"
#include "engine/model/families/tensor_names.h"

namespace textgen::families {
namespace {

constexpr LayerTensorName kTensors[] = {
    kAttnNorm, {"attn_qkv.weight", "self_attn.qkv_proj.weight"}, kAttnOut,
    kFfnNorm,  {"ffn_up.weight", "mlp.gate_up_proj.weight"},     kFfnDown,
};
constexpr const char* kHfTypes[] = {"phi3"};
constexpr ArchDoc kDocs[] = {
    {.models = "Phi-3, Phi-3.5 mini",
     .differs = "fused QKV and gate/up (row views, no copy), `longrope` long/short factors"}};

}  // namespace

ArchSpec Phi3() {
  ArchSpec a;
  a.gguf_arch = "phi3";
  a.hf_types = kHfTypes;
  a.tensors = kTensors;
  a.docs = kDocs;
  a.rope_neox = true;
  a.fused_qkv = true;
  a.fused_gate_up = true;
  a.reads_longrope = true;
  return a;
}

}  // namespace textgen::families
