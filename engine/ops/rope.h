// Rotary position embedding, in GGUF's interleaved layout (llama.cpp's "normal" rope, Llama)
// or the rotate-half layout (llama.cpp's NEOX rope: Qwen, Phi-3, Gemma).
#ifndef TEXTGEN_ENGINE_OPS_ROPE_H_
#define TEXTGEN_ENGINE_OPS_ROPE_H_

#include <cstdint>

namespace textgen::ops {

struct RopeConfig {
  int64_t n_heads = 0;  // heads per row of x (n_heads or n_kv_heads of the model)
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // even, <= head_dim; dims [rope_dim, head_dim) stay untouched
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling: the angle uses pos * freq_scale
  // false: pairs (2i, 2i+1) (GGUF's permuted q/k rows); true: pairs (i, i + rope_dim/2)
  // (Hugging Face's rotate_half order, kept by GGUF for NEOX architectures).
  bool neox = false;
  // Optional [rope_dim / 2] divisors of each pair's frequency (llama.cpp's rope_freqs: Llama 3
  // scaling, Phi-3 longrope's long/short factors); nullptr = all 1. Borrowed, must outlive calls.
  const float* freq_factors = nullptr;
  // Multiplies cos and sin (llama.cpp's attn_factor; Phi-3 longrope's attention factor; YaRN's
  // magnitude scale 1 + 0.1 ln(1 / freq_scale), which the caller puts here).
  float attn_factor = 1.0f;
  // YaRN (ggml's rope_yarn with ext_factor 1) when yarn_orig_ctx > 0: pair i turns by
  // pos * theta_i * ((1 - mix_i) * freq_scale + mix_i), theta_i = freq_base^(-2i / rope_dim) /
  // freq_factors[i], blending the interpolated and the extrapolated angle by the ramp
  // mix_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1) between the correction dims
  // lo = floor(D(beta_fast)), hi = ceil(D(beta_slow)) (clamped to [0, rope_dim - 1]), where
  // D(b) = rope_dim ln(yarn_orig_ctx / (2 pi b)) / (2 ln freq_base) (ggml_rope_yarn_corr_dims,
  // in float as ggml computes them). Still one frequency per pair, linear in the position: a
  // shift stays one rotation at that frequency.
  int64_t yarn_orig_ctx = 0;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
};

// The YaRN ramp mix_i of pair i (1: the extrapolated angle, 0: the interpolated one), as above.
float YarnRamp(const RopeConfig& config, int64_t pair);

// Rotates x [n, n_heads, head_dim] in place: for each head, pair i < rope_dim/2 ((2i, 2i+1), or
// (i, i + rope_dim/2) when neox) turns by pos * freq_scale * freq_base^(-2i / rope_dim) /
// freq_factors[i] (YaRN: the blended frequency above) with pos = positions[row] (int32), cos
// and sin scaled by attn_factor.
// Angles, cos and sin are computed in double (once per row, shared by the heads), so large
// positions lose no accuracy; llama.cpp's float angles differ by ~1e-4 relative at 10^4.
void Rope(const RopeConfig& config, const int32_t* positions, int64_t n, float* x);

// Rotates every row of x [n, n_heads, head_dim] by the same position delta (may be negative):
// Rope at p then RopeShift by d equals Rope at p + d up to float rounding. attn_factor is not
// applied (the cached keys already carry it once). For re-rotating
// cached keys after a sliding-window shift: one kv head of a cache block, [block_size,
// head_dim], is x with n = block_size and n_heads = 1.
void RopeShift(const RopeConfig& config, int32_t delta, int64_t n, float* x);

// RopeShift on transposed keys: kt [n_heads, head_dim, ld] holds, per head, dim d of slot r
// at kt[(h * head_dim + d) * ld + r] (the KV cache's K^T tiles; see engine/ops/attention.h).
// Rotates slots [0, n_slots), n_slots <= ld, with the same angles and float arithmetic as
// RopeShift, so it equals RopeShift on the untransposed data. Every slot turns by the same
// angle, so rows 2i and 2i+1 are rotated elementwise (vectorizes over the slots).
void RopeShiftTransposed(const RopeConfig& config, int32_t delta, int64_t n_slots, int64_t ld,
                         float* kt);
// The same on BF16 keys (uint16_t bit patterns, a BF16 KV cache's K^T tiles): each element is
// widened to F32, rotated with the same angles and arithmetic, and rounded to the nearest BF16
// (ties to even). Equals rounding the F32 version's result on the widened keys, so each shift
// adds one BF16 rounding (at most 2^-8 relative) to the keys it moves.
void RopeShiftTransposed(const RopeConfig& config, int32_t delta, int64_t n_slots, int64_t ld,
                         uint16_t* kt);

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_ROPE_H_
