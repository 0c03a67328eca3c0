// One sequence's view of the paged KV cache: which physical blocks hold its tokens, in order.
#ifndef TEXTGEN_ENGINE_KV_CACHE_BLOCK_TABLE_H_
#define TEXTGEN_ENGINE_KV_CACHE_BLOCK_TABLE_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace textgen {

// Token at logical slot p lives in block `blocks[p / block_size]` at offset `p % block_size`.
// Invariant kept by KvCache: blocks.size() == ceil(num_tokens / block_size).
//
// The table holds one reference on each of its blocks, so it is move-only: a plain copy would
// duplicate references the pool does not know about and end in a double free. Use
// KvCache::Fork to share blocks, and KvCache::Free before dropping a table (its destructor
// cannot release blocks, since it does not know the pool). A moved-from table is empty.
struct BlockTable {
  std::vector<int32_t> blocks;  // [ceil(num_tokens / block_size)] physical block ids
  int num_tokens = 0;

  BlockTable() = default;
  BlockTable(BlockTable&& other) noexcept
      : blocks(std::move(other.blocks)), num_tokens(std::exchange(other.num_tokens, 0)) {
    other.blocks.clear();
  }
  BlockTable& operator=(BlockTable&& other) noexcept {
    if (this != &other) {
      blocks = std::move(other.blocks);
      other.blocks.clear();
      num_tokens = std::exchange(other.num_tokens, 0);
    }
    return *this;
  }
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  bool empty() const { return blocks.empty(); }
  int num_blocks() const { return static_cast<int>(blocks.size()); }
  // Physical block and offset within it of logical `slot` (0 <= slot < num_tokens).
  int32_t BlockOf(int slot, int block_size) const { return blocks[slot / block_size]; }
  static int OffsetOf(int slot, int block_size) { return slot % block_size; }
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_BLOCK_TABLE_H_
