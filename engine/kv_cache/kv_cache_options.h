// Shape and size of the paged KV cache, plus the byte-budget helper that sizes it.
#ifndef TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_OPTIONS_H_
#define TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_OPTIONS_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace textgen {

// Element type of the cached keys and values. kBf16 halves the bytes attention streams per
// token (and doubles the tokens a byte budget holds); values are rounded to nearest even when
// stored and widened exactly when read, all arithmetic stays F32.
enum class KvType { kF32, kBf16 };

// "f32" / "bf16".
std::string_view KvTypeName(KvType type);
// Bytes of one element: 4 or 2.
size_t KvTypeBytes(KvType type);

// Every block starts on this boundary so SIMD loads of a block are aligned (the pool's base
// is page aligned and the block stride is padded to a multiple of it).
inline constexpr size_t kKvBlockAlignment = 64;

struct KvCacheOptions {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Tokens per block. 16 is vLLM's default: small enough that the partly filled tail wastes
  // little, large enough that one (layer, head) tile is a useful contiguous read.
  int block_size = 16;
  int num_blocks = 0;
  KvType type = KvType::kF32;

  // InvalidArgument unless every field is positive, the type is known and the pool size fits
  // in size_t.
  absl::Status Validate() const;

  // Elements one block actually uses: n_layers * 2 * n_kv_heads * block_size * head_dim.
  // Assumes the shape fields are valid.
  size_t ElementsPerBlock() const;
  // Distance between consecutive blocks in the pool, in bytes: ElementsPerBlock() *
  // KvTypeBytes(type) rounded up to kKvBlockAlignment. This is what a block really costs.
  size_t BlockStrideBytes() const;

  // How many blocks fit in `budget_bytes` for this shape and type (num_blocks is ignored),
  // clamped to INT_MAX. InvalidArgument if the shape or type is invalid; ResourceExhausted if
  // the budget does not hold even one block, since a zero-block cache can serve nothing.
  absl::StatusOr<int> NumBlocksForByteBudget(size_t budget_bytes) const;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_OPTIONS_H_
