// Kernel of PagedAttention (engine/ops/attention.h); trusts its arguments.
#ifndef TEXTGEN_ENGINE_OPS_ATTENTION_KERNEL_H_
#define TEXTGEN_ENGINE_OPS_ATTENTION_KERNEL_H_

#include <cstdint>

#include "engine/ops/attention.h"
#include "engine/ops/isa_namespace.h"

namespace textgen::ops::internal {
TG_ISA_BEGIN

// As PagedAttention (F32 or BF16 tiles) for kv heads [kv_begin, kv_end), with k_blocks/v_blocks
// holding at least ceil(n_ctx / block_size) pointers, valid from block start / block_size on.
void PagedAttentionKernel(const AttentionShape& shape, const float* q, const float* const* k_blocks,
                          const float* const* v_blocks, int64_t n_ctx, float* out, int64_t start,
                          int64_t kv_begin, int64_t kv_end);
void PagedAttentionKernel(const AttentionShape& shape, const float* q,
                          const uint16_t* const* k_blocks, const uint16_t* const* v_blocks,
                          int64_t n_ctx, float* out, int64_t start, int64_t kv_begin,
                          int64_t kv_end);

// The portable C++ form (scalar FMA chains, simd::Vec16<Portable> softmax): every level's
// kernel gives its bytes (issue #32); exposed, through the kernel table, for the tests.
namespace portable {
void PagedAttentionKernel(const AttentionShape& shape, const float* q, const float* const* k_blocks,
                          const float* const* v_blocks, int64_t n_ctx, float* out, int64_t start,
                          int64_t kv_begin, int64_t kv_end);
void PagedAttentionKernel(const AttentionShape& shape, const float* q,
                          const uint16_t* const* k_blocks, const uint16_t* const* v_blocks,
                          int64_t n_ctx, float* out, int64_t start, int64_t kv_begin,
                          int64_t kv_end);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops::internal

#endif  // TEXTGEN_ENGINE_OPS_ATTENTION_KERNEL_H_
