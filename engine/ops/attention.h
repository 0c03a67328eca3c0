// Attention of one query token over a paged KV cache (one sequence, one layer).
//
// The cache pool stores per block [n_layers][2 (K, V)][n_kv_heads][block_size * head_dim]; the
// caller passes, for the layer at hand, one K and one V pointer per block of the sequence in
// slot order, so slot t lives in block t / block_size at column/row r = t % block_size.
// Tile layouts per (block, layer, kv head h), both at offset h * block_size * head_dim:
//   V: row-major [block_size, head_dim]: element (r, d) at v_block + (h * bs + r) * hd + d.
//   K: transposed, Kᵀ [head_dim, block_size]: element (r, d) at k_block + (h * hd + d) * bs + r.
// Kᵀ lets the score kernel vectorize over slots (16 per vector) with one broadcast query
// element per head dim, which keeps small head dims (8, 16) from wasting vector lanes on
// horizontal reductions.
//
// Causal masking is the caller's n_ctx: the query sees slots [start, n_ctx). In prefill, call it
// per token with n_ctx = position + 1 after that token's K/V are written; a sliding-window layer
// (Gemma) passes start = max(0, n_ctx - window).
#ifndef TEXTGEN_ENGINE_OPS_ATTENTION_H_
#define TEXTGEN_ENGINE_OPS_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace textgen::ops {

struct AttentionShape {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads; query head i reads kv head i / (n_heads / n_kv)
  int64_t head_dim = 0;
  int64_t block_size = 0;  // slots per cache block
  float scale = 0.0f;      // score scale; 0 = 1 / sqrt(head_dim)
  // > 0: scores become softcap * tanh(score / softcap) before the softmax (Gemma 2's attention
  // logit soft-capping; the scale is applied first, as in llama.cpp and Hugging Face).
  float softcap = 0.0f;
  // [n_heads] or nullptr: one logit per query head that joins the head's softmax denominator
  // and contributes no value (gpt-oss's attention sinks; as llama.cpp's soft_max with sinks, it
  // is neither scaled nor soft-capped). Borrowed: must outlive the call.
  const float* sinks = nullptr;
};

// KV heads [begin, end) of a call; end = 0 means all (n_kv_heads).
struct KvHeadRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// out[n_heads, head_dim] = softmax(cap(scale · q · Kᵀ)) · V per query head, over slots
// [start, n_ctx); with sinks, head i's probabilities are exp(s_t - m) / (sum_t exp(s_t - m) +
// exp(sinks[i] - m)), m the maximum of the scores and the sink. q [n_heads, head_dim]; k_blocks are
// Kᵀ tiles, v_blocks row-major V tiles (above). Blocks beyond ceil(n_ctx / block_size) are not
// read. Scores and softmax in float (exponential sum in double). Thread-safe (per-thread scratch).
// InvalidArgument for bad shapes, n_ctx < 1, fewer blocks than n_ctx needs, null pointers, start
// outside [0, n_ctx), a bad head range. Blocks wholly before `start` are not read. heads: only kv
// heads [begin, end) and their query heads are computed (the rows of out of the other heads are not
// touched), each exactly as in a call over all heads: a caller can split one token's heads across
// threads (decode of a single sequence) without changing a bit.
absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const float* const> k_blocks,
                            absl::Span<const float* const> v_blocks, int64_t n_ctx, float* out,
                            int64_t start = 0, KvHeadRange heads = {});

// The same over a BF16 cache: the tiles (same layouts) hold BF16 bit patterns, which are
// widened to F32 exactly as they are loaded; scores, softmax and sums are the F32 version's
// arithmetic, so the result equals PagedAttention on the widened values up to float rounding
// (bit for bit in practice). Half the bytes per slot: decode attention is bound by them.
absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const uint16_t* const> k_blocks,
                            absl::Span<const uint16_t* const> v_blocks, int64_t n_ctx, float* out,
                            int64_t start = 0, KvHeadRange heads = {});

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_ATTENTION_H_
