#include "engine/ops/attention.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/ops/attention_kernel.h"

namespace textgen::ops {
namespace {

template <typename T>
absl::Status Check(const AttentionShape& shape, const float* q, absl::Span<const T* const> k_blocks,
                   absl::Span<const T* const> v_blocks, int64_t n_ctx, const float* out,
                   int64_t start, KvHeadRange heads) {
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
  if (start < 0 || start >= n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: start=", start, " outside [0, n_ctx=", n_ctx, ")"));
  }
  if (!(shape.scale >= 0.0f) || !(shape.softcap >= 0.0f) || std::isinf(shape.scale) ||
      std::isinf(shape.softcap)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: bad scale=", shape.scale, " softcap=", shape.softcap));
  }
  if (heads.begin < 0 || heads.end < 0 || heads.end > shape.n_kv_heads ||
      (heads.end > 0 && heads.begin >= heads.end) || (heads.end == 0 && heads.begin != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: kv heads [", heads.begin, ", ",
                                                   heads.end, ") of ", shape.n_kv_heads));
  }
  const int64_t need = (n_ctx + shape.block_size - 1) / shape.block_size;
  if (static_cast<int64_t>(k_blocks.size()) < need ||
      static_cast<int64_t>(v_blocks.size()) < need) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: n_ctx=", n_ctx, " needs ", need,
                                                   " blocks, got ", k_blocks.size(), " K and ",
                                                   v_blocks.size(), " V"));
  }
  for (int64_t b = start / shape.block_size; b < need; ++b) {
    if (k_blocks[b] == nullptr || v_blocks[b] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("PagedAttention: null block ", b));
    }
  }
  return absl::OkStatus();
}

// Both cache types: the checks, then the kernel over the requested kv heads.
template <typename T>
absl::Status Attention(const AttentionShape& shape, const float* q,
                       absl::Span<const T* const> k_blocks, absl::Span<const T* const> v_blocks,
                       int64_t n_ctx, float* out, int64_t start, KvHeadRange heads) {
  if (absl::Status s = Check(shape, q, k_blocks, v_blocks, n_ctx, out, start, heads); !s.ok()) {
    return s;
  }
  const int64_t end = heads.end > 0 ? heads.end : shape.n_kv_heads;
  internal::PagedAttentionKernel(shape, q, k_blocks.data(), v_blocks.data(), n_ctx, out, start,
                                 heads.begin, end);
  return absl::OkStatus();
}

}  // namespace

absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const float* const> k_blocks,
                            absl::Span<const float* const> v_blocks, int64_t n_ctx, float* out,
                            int64_t start, KvHeadRange heads) {
  return Attention(shape, q, k_blocks, v_blocks, n_ctx, out, start, heads);
}

absl::Status PagedAttention(const AttentionShape& shape, const float* q,
                            absl::Span<const uint16_t* const> k_blocks,
                            absl::Span<const uint16_t* const> v_blocks, int64_t n_ctx, float* out,
                            int64_t start, KvHeadRange heads) {
  return Attention(shape, q, k_blocks, v_blocks, n_ctx, out, start, heads);
}

}  // namespace textgen::ops
