// Per-layer tensor names most families share, for the families' tables (families/*.cc).
#ifndef TEXTGEN_ENGINE_MODEL_FAMILIES_TENSOR_NAMES_H_
#define TEXTGEN_ENGINE_MODEL_FAMILIES_TENSOR_NAMES_H_

#include "engine/model/arch.h"

namespace textgen::families {

inline constexpr LayerTensorName kAttnNorm = {"attn_norm.weight", "input_layernorm.weight"};
inline constexpr LayerTensorName kAttnQ = {"attn_q.weight", "self_attn.q_proj.weight"};
inline constexpr LayerTensorName kAttnK = {"attn_k.weight", "self_attn.k_proj.weight"};
inline constexpr LayerTensorName kAttnV = {"attn_v.weight", "self_attn.v_proj.weight"};
inline constexpr LayerTensorName kAttnQBias = {"attn_q.bias", "self_attn.q_proj.bias"};
inline constexpr LayerTensorName kAttnKBias = {"attn_k.bias", "self_attn.k_proj.bias"};
inline constexpr LayerTensorName kAttnVBias = {"attn_v.bias", "self_attn.v_proj.bias"};
inline constexpr LayerTensorName kAttnQNorm = {"attn_q_norm.weight", "self_attn.q_norm.weight"};
inline constexpr LayerTensorName kAttnKNorm = {"attn_k_norm.weight", "self_attn.k_norm.weight"};
inline constexpr LayerTensorName kAttnOut = {"attn_output.weight", "self_attn.o_proj.weight"};
// Llama's Hugging Face "post_attention_layernorm" is the pre-FFN norm (Gemma's is not).
inline constexpr LayerTensorName kFfnNorm = {"ffn_norm.weight", "post_attention_layernorm.weight"};
inline constexpr LayerTensorName kFfnGate = {"ffn_gate.weight", "mlp.gate_proj.weight"};
inline constexpr LayerTensorName kFfnUp = {"ffn_up.weight", "mlp.up_proj.weight"};
inline constexpr LayerTensorName kFfnDown = {"ffn_down.weight", "mlp.down_proj.weight"};

}  // namespace textgen::families

#endif  // TEXTGEN_ENGINE_MODEL_FAMILIES_TENSOR_NAMES_H_
