#include "engine/kv_cache/kv_cache_options.h"

#include <climits>
#include <cstdint>
#include <limits>

#include "absl/strings/str_format.h"

namespace textgen {
namespace {

// *out = a * b; true if that overflowed size_t.
bool MulOverflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }

absl::Status ValidateShape(const KvCacheOptions& o) {
  if (o.type != KvType::kF32 && o.type != KvType::kBf16) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV cache type %d is not f32 or bf16", static_cast<int>(o.type)));
  }
  if (o.n_layers <= 0 || o.n_kv_heads <= 0 || o.head_dim <= 0 || o.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache shape must be positive: n_layers=%d n_kv_heads=%d head_dim=%d block_size=%d",
        o.n_layers, o.n_kv_heads, o.head_dim, o.block_size));
  }
  // Ints from a config file can multiply past size_t; every size derived later assumes not.
  size_t elements = 2;
  for (int f : {o.n_layers, o.n_kv_heads, o.block_size, o.head_dim}) {
    if (MulOverflows(elements, static_cast<size_t>(f), &elements)) {
      return absl::InvalidArgumentError("KV cache block size overflows size_t");
    }
  }
  size_t bytes;
  if (MulOverflows(elements, KvTypeBytes(o.type), &bytes) ||
      bytes > std::numeric_limits<size_t>::max() - kKvBlockAlignment) {
    return absl::InvalidArgumentError("KV cache block size overflows size_t");
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view KvTypeName(KvType type) { return type == KvType::kBf16 ? "bf16" : "f32"; }

size_t KvTypeBytes(KvType type) { return type == KvType::kBf16 ? 2 : 4; }

absl::Status KvCacheOptions::Validate() const {
  if (absl::Status s = ValidateShape(*this); !s.ok()) return s;
  if (num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV cache num_blocks must be positive, got %d", num_blocks));
  }
  size_t total;
  if (MulOverflows(BlockStrideBytes(), static_cast<size_t>(num_blocks), &total)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache of %d blocks x %u bytes overflows size_t", num_blocks, BlockStrideBytes()));
  }
  return absl::OkStatus();
}

size_t KvCacheOptions::ElementsPerBlock() const {
  return static_cast<size_t>(n_layers) * 2 * static_cast<size_t>(n_kv_heads) *
         static_cast<size_t>(block_size) * static_cast<size_t>(head_dim);
}

size_t KvCacheOptions::BlockStrideBytes() const {
  const size_t bytes = ElementsPerBlock() * KvTypeBytes(type);
  return (bytes + kKvBlockAlignment - 1) / kKvBlockAlignment * kKvBlockAlignment;
}

absl::StatusOr<int> KvCacheOptions::NumBlocksForByteBudget(size_t budget_bytes) const {
  if (absl::Status s = ValidateShape(*this); !s.ok()) return s;
  const size_t stride = BlockStrideBytes();
  const size_t blocks = budget_bytes / stride;
  if (blocks == 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache budget of %u bytes is smaller than one block (%u bytes: %d layers x 2 x %d "
        "kv heads x %d tokens x %d dims x %u bytes (%s))",
        budget_bytes, stride, n_layers, n_kv_heads, block_size, head_dim, KvTypeBytes(type),
        KvTypeName(type)));
  }
  return blocks > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(blocks);
}

}  // namespace textgen
