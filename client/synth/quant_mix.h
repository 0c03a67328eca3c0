// llama-quantize's file types (`--type q4_k_m`, ...) and its per-tensor type rules, so synthetic
// models hold the tensor types a downloaded GGUF of the same name holds.
#ifndef TEXTGEN_CLIENT_SYNTH_QUANT_MIX_H_
#define TEXTGEN_CLIENT_SYNTH_QUANT_MIX_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/format/dtype.h"

namespace textgen {

// One llama.cpp file type: its `--type` name, its LLAMA_FTYPE_* value (general.file_type) and
// the type of the tensors no rule changes (llama_ftype_get_default_type).
struct QuantMix {
  std::string_view name;  // "q4_k_m"
  uint32_t llama_ftype = 0;
  DType base = DType::kF32;
};

// Every file type textgen-synth-model writes, in the order --help lists them.
absl::Span<const QuantMix> QuantMixes();

// The mix named `name` (lower case, as llama-quantize's names lower-cased); InvalidArgument
// listing the valid names otherwise.
absl::StatusOr<QuantMix> FindQuantMix(std::string_view name);

// What the rules look at besides the tensor itself.
struct QuantMixModel {
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  bool tied = false;  // no output.weight: token_embd is also the output projection
  int n_expert = 0;   // experts per layer (llama.cpp has rules for 8: Mixtral, and MXFP4_MOE)
};

// The type llama-quantize (no importance matrix, no overrides) gives the 2-D weight `name` of
// `ncols` values a row (ggml ne[0]) in a file of `mix`: llama_tensor_get_type's rules for
// non-Falcon models (with its 8-expert rules for Mixtral), then its fallback when ncols is not a
// multiple of the chosen type's block (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
// IQ4_XS -> IQ4_NL; F16 when even that does not divide). MXFP4_MOE: the 3-D expert stacks
// (names with "_exps.", when n_expert > 1) MXFP4, every other matrix Q8_0. Norms, biases, routers
// (ffn_gate_inp) and other 1-D tensors are not quantized by llama-quantize and are not this
// function's business.
//
// llama.cpp counts attn_v / attn_qkv and ffn_down tensors in (layer, name) order; every layer
// of these models has exactly one of each, so the count equals the layer number parsed from
// "blk.N.", which makes this a pure function of its arguments.
DType ChooseTensorType(const QuantMix& mix, const QuantMixModel& model, std::string_view name,
                       int64_t ncols);

}  // namespace textgen

#endif  // TEXTGEN_CLIENT_SYNTH_QUANT_MIX_H_
