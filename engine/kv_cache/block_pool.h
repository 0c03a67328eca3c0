// The physical storage of the paged KV cache: one buffer cut into fixed-size blocks, a free
// list and per-block reference counts (vLLM's block allocator).
#ifndef TEXTGEN_ENGINE_KV_CACHE_BLOCK_POOL_H_
#define TEXTGEN_ENGINE_KV_CACHE_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv_cache/kv_cache_options.h"
#include "engine/kv_cache/prefix_index.h"

namespace textgen {

// Owns every KV block. A block holds `block_size` token positions for all layers; its layout
//   [n_layers][2 (K, V)][n_kv_heads][block_size][head_dim]  (options.type: F32 or BF16)
// puts the keys (or values) of one layer and one KV head for all of the block's tokens in one
// contiguous [block_size, head_dim] tile, which is what attention streams through. The tiles
// are read and written through the accessors of the pool's type: Key/Value (float) for kF32,
// KeyBf16/ValueBf16 (uint16_t BF16 bit patterns, the high halves of F32s) for kBf16; using
// the other type's accessor is a caller bug (asserts in debug builds).
//
// A block id is free (refcount 0, on the free list exactly once), live (refcount >= 1, not on
// the free list) or, with the prefix cache enabled, cached idle (refcount 0, published in the
// PrefixIndex and in its idle order, not on the free list): its K/V is kept for a later request
// with the same prefix until Allocate needs the block (least recently used first). Idle blocks
// count as free in num_free(): taking one back costs nothing. Refcounts above 1 mean the block
// is shared between sequences (a fork or a shared prefix) and must not be written; see KvCache
// for copy-on-write.
//
// The buffer is reserved with mmap and never zeroed or touched here, so a pool sized to most of
// RAM costs nothing until blocks are written; fresh pages read as zero, recycled blocks hold
// stale data.
//
// Thread-compatible: const methods may run concurrently; anything else needs external locking.
class BlockPool {
 public:
  // InvalidArgument for a bad shape (see KvCacheOptions::Validate), ResourceExhausted if the
  // OS refuses the mapping.
  static absl::StatusOr<std::unique_ptr<BlockPool>> Create(const KvCacheOptions& options);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Takes a free block (else evicts the least recently used idle one, unpublishing it) and sets
  // its refcount to 1. Its contents are unspecified. ResourceExhausted if none is free or idle.
  absl::StatusOr<int32_t> Allocate();
  // Adds a reference to a live block, or takes an idle one back (refcount 1). Referencing a
  // free or out-of-range block is a caller bug: asserts in debug builds, returns
  // FailedPrecondition / OutOfRange (changing nothing) otherwise.
  absl::Status IncRef(int32_t block);
  // Drops a reference; at 0 a published block becomes idle (the newest), any other returns to
  // the free list. Same bug handling as IncRef, so a double free can never put a block on the
  // free list twice.
  absl::Status DecRef(int32_t block);
  // 0 for free blocks (and, defensively, for out-of-range ids).
  int RefCount(int32_t block) const;

  // Copies every layer's K and V of `src` into `dst` (the padding is not copied). Both must be
  // valid ids; copying a block onto itself does nothing.
  void CopyBlock(int32_t src, int32_t dst);

  // [block_size, head_dim] tiles of one block for one layer and one KV head, F32 pools.
  float* Key(int32_t block, int layer, int kv_head) { return F32Tile(block, layer, 0, kv_head); }
  float* Value(int32_t block, int layer, int kv_head) { return F32Tile(block, layer, 1, kv_head); }
  const float* Key(int32_t block, int layer, int kv_head) const {
    return const_cast<BlockPool*>(this)->F32Tile(block, layer, 0, kv_head);
  }
  const float* Value(int32_t block, int layer, int kv_head) const {
    return const_cast<BlockPool*>(this)->F32Tile(block, layer, 1, kv_head);
  }
  // The same tiles of a BF16 pool.
  uint16_t* KeyBf16(int32_t block, int layer, int kv_head) {
    return Bf16Tile(block, layer, 0, kv_head);
  }
  uint16_t* ValueBf16(int32_t block, int layer, int kv_head) {
    return Bf16Tile(block, layer, 1, kv_head);
  }
  const uint16_t* KeyBf16(int32_t block, int layer, int kv_head) const {
    return const_cast<BlockPool*>(this)->Bf16Tile(block, layer, 0, kv_head);
  }
  const uint16_t* ValueBf16(int32_t block, int layer, int kv_head) const {
    return const_cast<BlockPool*>(this)->Bf16Tile(block, layer, 1, kv_head);
  }

  // Starts the prefix index (see PrefixIndex); until then nothing is published or idle.
  void EnablePrefixIndex();
  // Null while the prefix cache is off.
  PrefixIndex* prefix_index() { return index_.get(); }
  const PrefixIndex* prefix_index() const { return index_.get(); }
  // Publishes a live block (see PrefixIndex::Publish). False when off or refused.
  bool Publish(int32_t block, uint64_t hash, PrefixIndex::Link parent,
               absl::Span<const int32_t> tokens);
  // Publishes a live block's partly filled rows as a leaf (see PrefixIndex::PublishLeaf).
  bool PublishLeaf(int32_t block, PrefixIndex::Link parent, absl::Span<const int32_t> tokens);
  // Forgets a block's prefix identity before its K/V changes in place; an idle block is freed.
  void Unpublish(int32_t block);
  // Bytes of the pool's mapping the OS holds in memory (mincore): the pages blocks have
  // touched so far. Lets a memory check tell the pool's first touches from heap growth. May run
  // concurrently with anything (reads no mutable member).
  size_t ResidentBytes() const;
  // Commits every page of the pool now (MADV_POPULATE_WRITE, else a write per page), so that
  // blocks never fault in zeroed pages mid-request. Worth it when the whole pool will be touched
  // anyway: with the prefix cache, freed blocks stay cached and new blocks keep coming from
  // untouched pages until the pool has been used through once (a measured 2-4% of a step's
  // time while that lasts). ResourceExhausted if the memory cannot be committed.
  absl::Status Prefault();
  // Idle blocks taken by Allocate so far.
  int64_t evictions() const { return evictions_; }
  // Called by Allocate with an idle full (not leaf) block it is about to take, while the block
  // still holds its K/V and its name (the KV disk tier copies it out). Null: none.
  void SetEvictionHook(std::function<void(int32_t block)> hook) { on_evict_ = std::move(hook); }

  // A block's bytes: payload_bytes() of them (its layers' tiles, without the padding).
  std::byte* BlockData(int32_t block) { return Tile(block, 0, 0, 0); }
  const std::byte* BlockData(int32_t block) const {
    return const_cast<BlockPool*>(this)->Tile(block, 0, 0, 0);
  }
  size_t payload_bytes() const { return options_.ElementsPerBlock() * KvTypeBytes(options_.type); }

  // Blocks Allocate can hand out: free plus cached idle.
  int num_free() const {
    return static_cast<int>(free_list_.size()) + (index_ ? index_->num_idle() : 0);
  }
  int num_idle() const { return index_ ? index_->num_idle() : 0; }
  int num_total() const { return options_.num_blocks; }
  int block_size() const { return options_.block_size; }
  KvType type() const { return options_.type; }
  // Bytes between consecutive blocks (the used elements padded to kKvBlockAlignment).
  size_t block_bytes() const { return block_stride_; }
  const KvCacheOptions& options() const { return options_; }
  // The free list, next block to be allocated last. For diagnostics and tests.
  absl::Span<const int32_t> free_blocks() const { return free_list_; }

 private:
  BlockPool(const KvCacheOptions& options, std::byte* data, size_t mapped_bytes);
  // First byte of a tile.
  std::byte* Tile(int32_t block, int layer, int kv, int kv_head);
  float* F32Tile(int32_t block, int layer, int kv, int kv_head);
  uint16_t* Bf16Tile(int32_t block, int layer, int kv, int kv_head);
  // OutOfRange unless 0 <= block < num_total(); asserts first in debug builds.
  absl::Status CheckId(int32_t block, const char* op) const;

  const KvCacheOptions options_;
  const size_t block_stride_;  // bytes between blocks, a multiple of kKvBlockAlignment
  const size_t tile_bytes_;    // block_size * head_dim elements
  std::byte* const data_;      // [num_blocks][block_stride_] bytes, page aligned
  const size_t mapped_bytes_;
  std::vector<int32_t> free_list_;  // LIFO stack: a just-freed block is reused first (warm)
  std::vector<int32_t> refcount_;   // [num_blocks]
  std::unique_ptr<PrefixIndex> index_;
  std::function<void(int32_t)> on_evict_;
  int64_t evictions_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_BLOCK_POOL_H_
