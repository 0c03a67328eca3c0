// The paged KV cache manager (vLLM block-manager style): grows, forks, shrinks and frees
// per-sequence block tables over one shared BlockPool, with copy-on-write for shared blocks.
#ifndef TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_H_
#define TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv_cache/block_pool.h"
#include "engine/kv_cache/block_table.h"
#include "engine/kv_cache/kv_cache_options.h"
#include "engine/kv_cache/kv_disk_store.h"

namespace textgen {

// Typical use per decode step: `CanAppend(t, n)` (scheduler), `Append(t, n)`, then the model
// writes K/V for slots [old num_tokens, new num_tokens) through KeySlot/ValueSlot and reads
// earlier slots through the pool's [block_size, head_dim] tiles of `t.blocks` (LlamaModel
// keeps its keys in transposed tiles instead; see KeySlot).
//
// Sharing rule: a block with refcount > 1 is read-only. Append guarantees that every slot it
// makes room for lies in a block referenced only by `t` (it copies a shared, partly filled
// last block first), so writing just the newly appended slots never disturbs a fork.
// Overwriting older slots is only safe in blocks whose refcount is 1.
//
// Automatic prefix caching (off until EnablePrefixCache): full blocks whose K/V is final are
// published under their token prefix (PrefixIndex); a later sequence starting with the same
// tokens shares them (MatchPrefix) instead of computing them again. A finished sequence's partly
// filled last block can be published too, as a leaf (PublishTail); where the shared chain
// ends, a match copies the leading rows it shares with a leaf or a full block that goes on
// differently into a fresh block instead of sharing it. A published block is never
// written in place: Append copies it if shared and unpublishes it if not, and anything else
// that rewrites K/V (the context shift) unpublishes it first.
//
// Every BlockTable passed in must have been built by this KvCache (empty, Fork, Append...) and
// must be Freed before it is dropped, or its blocks leak.
//
// Thread-compatible: the scheduler drives it from one thread. Concurrent readers of the block
// data (attention over different sequences) are fine while no method mutates the cache.
class KvCache {
 public:
  // See BlockPool::Create for errors.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheOptions& options);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Makes room for `n` more tokens and advances t.num_tokens by n, allocating blocks as needed
  // and copying the last block first if it is shared and partly filled (copy-on-write).
  // All-or-nothing: on ResourceExhausted (message gives blocks needed vs free) neither `t` nor
  // the pool changed. InvalidArgument if n < 0 or the count would overflow. n == 0 is a no-op.
  absl::Status Append(BlockTable& t, int n);
  // Free blocks Append(t, n) would take, including the copy-on-write block.
  int BlocksNeeded(const BlockTable& t, int n) const;
  bool CanAppend(const BlockTable& t, int n) const {
    return BlocksNeeded(t, n) <= pool_->num_free();
  }

  // Starts the prefix cache. `seed` stands for everything besides the tokens that decides a
  // block's K/V (model, KV type, compute type): caches with different seeds never match.
  void EnablePrefixCache(uint64_t seed);
  bool prefix_cache_enabled() const { return pool_->prefix_index() != nullptr; }
  // A table sharing the longest chain of published blocks that hold the first whole blocks of
  // `tokens`, at most `max_blocks` of them (each refcount + 1; idle ones are taken back). If the
  // chain stopped before `max_blocks`, the published block under it (a leaf, or a full block
  // that goes on differently) sharing the most of the next tokens has those rows copied into a
  // fresh block that ends the table (only if that makes the match longer than `copy_above` tokens,
  // and a block can be allocated). Every matched token is one of `tokens`; empty when off or
  // nothing matches.
  BlockTable MatchPrefix(absl::Span<const int32_t> tokens, int max_blocks, int copy_above = 0);
  struct PrefixPeek {
    int blocks = 0;  // MatchPrefix would share this many blocks
    int live = 0;    // of them, held by other tables (they cost no free block)
  };
  // With a disk store (SetDiskStore), a chain that ends in memory before `max_blocks` goes on
  // with the blocks the store holds for the next tokens: each is read into a fresh block and
  // published as if computed (a file that fails its checks is deleted, and the chain ends there:
  // those tokens are recomputed). This runs on the caller's thread.
  //
  // What MatchPrefix would share, changing nothing (in memory; disk blocks are not counted).
  PrefixPeek PeekPrefix(absl::Span<const int32_t> tokens, int max_blocks) const;
  // Publishes the full blocks among the first `max_blocks` of `t`, whose K/V must be final and
  // of `tokens` (t's first t.num_tokens tokens; more may follow). Blocks already published
  // under the same prefix (by another table) are skipped; publishing stops at the first block
  // that cannot be (e.g. published under another name). No-op when off.
  void PublishPrefix(const BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks);
  // PublishPrefix, then the partly filled last block (if within `max_blocks`, its rows final,
  // and every block before it published) as a leaf.
  void PublishTail(const BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks);

  // A new table sharing every block of `t` (each refcount + 1); no data is copied. Both
  // tables may then Append independently; the first to write a shared partial block copies it.
  BlockTable Fork(const BlockTable& t);
  // Drops the table's references (last block first, so that a chain's tail becomes idle before
  // its head and is evicted first) and leaves it empty. Idempotent.
  void Free(BlockTable& t);
  // Keeps the first `num_tokens` tokens (0 <= num_tokens <= t.num_tokens) and releases the
  // blocks no longer needed, e.g. when a session rolls back to an earlier turn. Data in the
  // kept slots is untouched.
  void Truncate(BlockTable& t, int num_tokens);
  // Speculative decoding's rollback past the first rejected draft: Truncate to `num_tokens`,
  // and the rejected tokens also leave the prefix cache. A released block that only `t` holds
  // is unpublished first (it returns to the free list instead of lingering as a cache entry of
  // a continuation the model rejected); so is the kept last block when the cut falls inside
  // it, only `t` holds it and its name covers rows past the cut (the next Append rewrites
  // those rows in place). A block other tables hold keeps its name (its rows are theirs too)
  // and is never written: the next Append copies it first (copy-on-write, as for a fork). So
  // after Rollback, Appends and writes of the new slots, no published block holds a row other
  // than the ones it was published with, and the blocks released are back in the pool.
  // InvalidArgument, changing nothing, unless 0 <= num_tokens <= t.num_tokens.
  absl::Status Rollback(BlockTable& t, int num_tokens);
  // Sliding-window eviction: releases `n_blocks_to_drop` whole blocks starting after the first
  // `keep_blocks` (the kept prefix is typically the system prompt / attention sinks), requires
  // keep_blocks + n_blocks_to_drop <= t.num_blocks(). Logical slots after the dropped range
  // shift down by n_blocks_to_drop * block_size (token data stays in its block; only the
  // numbering changes), so any position-dependent state (RoPE already baked into K) is the
  // caller's concern. If the dropped range includes the partly filled last block, num_tokens
  // becomes keep_blocks * block_size.
  void DropFront(BlockTable& t, int n_blocks_to_drop, int keep_blocks);

  // The model's layout, stated here once (PagedAttention in engine/ops/attention.h and the
  // context shift's re-rotation read exactly this): per block, layer and KV head h, keys are
  // TRANSPOSED, a Kᵀ [head_dim, block_size] tile with dim d of in-block row r at
  // Key(block, layer, h)[d * block_size + r]; values are a row-major V [block_size, head_dim]
  // tile, element (r, d) at Value(block, layer, h)[r * head_dim + d]. Why transposed: the score
  // kernel then vectorizes over slots with one broadcast query element per head dim, which
  // keeps small head dims from wasting vector lanes.
  //
  // Stores one token's k, v [n_kv_heads, head_dim] for `layer` at logical `slot` (< t.num_tokens,
  // in a block only `t` references, as Append guarantees for new slots) in that layout; a BF16
  // cache gets them rounded to nearest even.
  void StoreKv(const BlockTable& t, int layer, int slot, const float* k, const float* v);

  // [head_dim] key / value of one token: layer, KV head, logical slot in [0, t.num_tokens).
  // Both address a row-major [block_size, head_dim] tile (the pool's own view, used by generic
  // users and tests). The model stores keys TRANSPOSED instead (StoreKv above), so on such a
  // cache KeySlot does not point at a token's key. F32 caches only (options().type); a BF16
  // cache is addressed through pool().KeyBf16 / ValueBf16.
  float* KeySlot(const BlockTable& t, int layer, int kv_head, int slot) {
    return Slot(t, layer, kv_head, slot, /*value=*/false);
  }
  float* ValueSlot(const BlockTable& t, int layer, int kv_head, int slot) {
    return Slot(t, layer, kv_head, slot, /*value=*/true);
  }
  const float* KeySlot(const BlockTable& t, int layer, int kv_head, int slot) const {
    return const_cast<KvCache*>(this)->Slot(t, layer, kv_head, slot, false);
  }
  const float* ValueSlot(const BlockTable& t, int layer, int kv_head, int slot) const {
    return const_cast<KvCache*>(this)->Slot(t, layer, kv_head, slot, true);
  }

  // The disk level beneath the prefix cache (needs EnablePrefixCache first; not owned: it must
  // outlive this cache, or be detached with nullptr). With one, every idle full block the pool
  // evicts is copied to the store's writer (dropped if its queue is full), and MatchPrefix reads
  // matching blocks back (see there).
  void SetDiskStore(KvDiskStore* store);
  KvDiskStore* disk_store() const { return disk_; }
  // Hands every idle published full block to the disk store, oldest first, waiting for room in
  // its queue rather than dropping (shutdown: so that a restart finds them). Returns how many
  // were queued (blocks on disk already are not). 0 without a store.
  int SpillIdleToDisk();

  // Free plus cached idle blocks (both can be allocated).
  int num_free_blocks() const { return pool_->num_free(); }
  int num_idle_blocks() const { return pool_->num_idle(); }
  int num_total_blocks() const { return pool_->num_total(); }
  int block_size() const { return pool_->block_size(); }
  const KvCacheOptions& options() const { return pool_->options(); }
  // Direct block access for attention kernels (tiles of t.blocks[i]).
  BlockPool& pool() { return *pool_; }
  const BlockPool& pool() const { return *pool_; }

 private:
  explicit KvCache(std::unique_ptr<BlockPool> pool) : pool_(std::move(pool)) {}
  float* Slot(const BlockTable& t, int layer, int kv_head, int slot, bool value);
  // DecRef that reports a refcount bug loudly instead of dropping it.
  void Release(int32_t block);
  // Blocks needed to hold `num_tokens` tokens.
  int BlocksFor(int64_t num_tokens) const;
  // Walks the published chain of `tokens` from its first block: calls
  // visit(j, found, hash, link, block_tokens) for each of the first `max_blocks` whole blocks,
  // where `found` is the published block holding block j's tokens after the chain so far (or
  // -1), and hash / link the name block j has or would be published under. visit returns the
  // block that continues the chain (-1 stops the walk).
  template <typename Visit>
  void WalkPrefix(absl::Span<const int32_t> tokens, int max_blocks, Visit visit) const;
  // MatchPrefix's last step: appends to `t` (its full blocks matched) a copy of the rows the
  // best published block under its chain shares with `rest`, the tokens after them, if more than
  // `min_tokens` in all.
  void CopyLeaf(BlockTable& t, absl::Span<const int32_t> rest, int min_tokens);
  // MatchPrefix's last disk step, when no leaf in memory matched: appends to `t` (whole blocks
  // of `tokens`) the partly filled block on disk that holds the most of the next tokens (more
  // than `min_tokens` in all), read into a fresh block.
  void LeafFromDisk(BlockTable& t, absl::Span<const int32_t> tokens, int min_tokens);
  // MatchPrefix's disk step: extends `t` (whole blocks of `tokens`) with blocks read from disk,
  // up to `max_blocks`.
  void ExtendFromDisk(BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks);
  // The tokens of a published block's chain (a leaf's ends partly filled), first block's
  // first; false if a link to a parent is stale (the parent was evicted: the chain cannot be
  // named).
  bool ChainOf(int32_t block, std::vector<int32_t>* chain) const;
  // Queues a published block, full or leaf, for the disk store (see KvDiskStore::Enqueue).
  bool Spill(int32_t block, bool wait);

  std::unique_ptr<BlockPool> pool_;
  uint64_t prefix_seed_ = 0;
  KvDiskStore* disk_ = nullptr;
  std::vector<int32_t> chain_scratch_;  // Spill's, reused
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_KV_CACHE_H_
