#include "engine/ops/attention.h"

#include "absl/strings/str_cat.h"
#include "engine/ops/attention_kernel.h"

namespace textgen::ops {
namespace {

template <typename T>
absl::Status Check(const AttentionShape& shape, const float* q, absl::Span<const T* const> k_blocks,
                   absl::Span<const T* const> v_blocks, int64_t n_ctx, const float* out) {
  if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.head_dim < 1 || shape.block_size < 1 ||
      shape.n_heads % shape.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PagedAttention: bad shape n_heads=", shape.n_heads, " n_kv_heads=", shape.n_kv_heads,
        " head_dim=", shape.head_dim, " block_size=", shape.block_size));
  }
  if (q == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("PagedAttention: null q or out");
  }
  if (n_ctx < 1) return absl::InvalidArgumentError(absl::StrCat("PagedAttention: n_ctx=", n_ctx));
  const int64_t need = (n_ctx + shape.block_size - 1) / shape.block_size;
  if (static_cast<int64_t>(k_blocks.size()) < need ||
      static_cast<int64_t>(v_blocks.size()) < need) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: n_ctx=", n_ctx, " needs ", need,
                                                   " blocks, got ", k_blocks.size(), " K and ",
                                                   v_blocks.size(), " V"));
  }
  for (int64_t b = 0; b < need; ++b) {
    if (k_blocks[b] == nullptr || v_blocks[b] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("PagedAttention: null block ", b));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const float* const> k_blocks,
                            absl::Span<const float* const> v_blocks, int64_t n_ctx, float* out) {
  if (absl::Status s = Check(shape, q, k_blocks, v_blocks, n_ctx, out); !s.ok()) return s;
  internal::PagedAttentionKernel(shape, q, k_blocks.data(), v_blocks.data(), n_ctx, out);
  return absl::OkStatus();
}

absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const uint16_t* const> k_blocks,
                            absl::Span<const uint16_t* const> v_blocks, int64_t n_ctx, float* out) {
  if (absl::Status s = Check(shape, q, k_blocks, v_blocks, n_ctx, out); !s.ok()) return s;
  internal::PagedAttentionKernel(shape, q, k_blocks.data(), v_blocks.data(), n_ctx, out);
  return absl::OkStatus();
}

}  // namespace textgen::ops
