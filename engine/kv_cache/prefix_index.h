// Automatic prefix caching's bookkeeping: which full KV blocks hold which token prefixes, and in
// what order the ones nobody references are given up (vLLM's hashed blocks, SGLang's radix
// tree in a flat form).
#ifndef TEXTGEN_ENGINE_KV_CACHE_PREFIX_INDEX_H_
#define TEXTGEN_ENGINE_KV_CACHE_PREFIX_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace textgen {

// A published block is a full block whose K/V is final and is named by (1) its chain hash: a
// hash of its tokens chained over its parent's hash, the first block's over a seed that stands
// for everything else that changes K/V (model, KV type, ...), (2) its parent link: the block
// holding the preceding tokens and that block's epoch, (3) its tokens. Find compares all three,
// so a hash collision (forced in tests with SetHashBitsForTesting) can never match a wrong
// block; the hash only narrows the search. A block's epoch grows whenever it is unpublished
// (evicted, or about to be rewritten), so children published under its old identity are never
// reached again: the chain is matched from its first block on, link by link.
//
// Leaves: a block's partly filled tail (1..block_size-1 tokens, its K/V final for those rows)
// can be published as a leaf under its parent link. Leaves have no chain hash and no
// children. FindPartial gives the published block, leaf or full, sharing the most leading
// tokens with a prompt's next tokens, whose rows the caller copies (never shares: the rows past
// the match are stale for the new sequence). Both kinds are also filed under a key of (parent
// link, first token); at most kMaxLeavesPerKey leaves per key, so a lookup scans few leaves
// (and the full blocks that begin alike under one parent).
//
// Idle blocks: published blocks nobody references (refcount 0 in the pool), kept in
// least-recently-used order until the pool needs them.
//
// Holds no K/V and no reference counts; BlockPool drives it. Thread-compatible.
class PrefixIndex {
 public:
  static constexpr int32_t kRoot = -1;  // the parent of a chain's first block
  struct Link {
    int32_t parent = kRoot;
    uint32_t epoch = 0;
    bool operator==(const Link& o) const { return parent == o.parent && epoch == o.epoch; }
  };

  PrefixIndex(int num_blocks, int block_size);

  // The chain hash of a block holding `tokens` (block_size of them) whose parent's is `parent`.
  uint64_t ChainHash(uint64_t parent, absl::Span<const int32_t> tokens) const;
  // The published block named (hash, parent, tokens), or -1.
  int32_t Find(uint64_t hash, Link parent, absl::Span<const int32_t> tokens) const;
  // Names `block` (full, its K/V final). False, changing nothing, if it is published already or
  // another block has that name (one block per name).
  bool Publish(int32_t block, uint64_t hash, Link parent, absl::Span<const int32_t> tokens);
  // Names `block` a leaf holding `tokens` (1..block_size-1 of them) after `parent`. False,
  // changing nothing, if it is published already, a leaf under that parent holds these tokens
  // (or more that start with them), or that key has kMaxLeavesPerKey leaves.
  bool PublishLeaf(int32_t block, Link parent, absl::Span<const int32_t> tokens);
  struct LeafMatch {
    int32_t block = -1;
    int tokens = 0;  // leading tokens it shares with the query (>= 1 when found)
  };
  // The published block (leaf or full) under `parent` sharing the most leading tokens with
  // `tokens`; block -1 if none.
  LeafMatch FindPartial(Link parent, absl::Span<const int32_t> tokens) const;
  static constexpr int kMaxLeavesPerKey = 8;

  // Forgets the block's name (its epoch grows); an idle block leaves the LRU order (the caller
  // frees it). No-op for unpublished blocks.
  void Unpublish(int32_t block);
  bool published(int32_t block) const { return entries_[block].published; }
  bool leaf(int32_t block) const { return entries_[block].leaf; }
  // The link a child of `block` is published under.
  Link LinkTo(int32_t block) const { return {block, entries_[block].epoch}; }

  // Idle order. MarkIdle: a published block's last reference went (it becomes the newest);
  // MarkUsed: it is referenced again. Oldest: the next to evict, -1 if none.
  void MarkIdle(int32_t block);
  void MarkUsed(int32_t block);
  bool idle(int32_t block) const { return entries_[block].idle; }
  int32_t Oldest() const { return lru_head_; }
  // The idle block used just after `block` (an idle one), -1 for the newest.
  int32_t NewerIdle(int32_t block) const { return entries_[block].next; }
  int num_idle() const { return num_idle_; }
  int num_published() const { return num_published_; }  // leaves included
  int num_leaves() const { return num_leaves_; }

  // Keeps only the low `bits` (1..64) of every chain hash, so that different blocks collide.
  void SetHashBitsForTesting(int bits);

  // For invariant tests (and KvCache::Rollback, which asks how many rows a name covers): the
  // block's name as published (a leaf's hash is its LeafKey), tokens
  // only as many as it holds.
  uint64_t hash(int32_t block) const { return entries_[block].hash; }
  Link parent(int32_t block) const { return entries_[block].parent; }
  absl::Span<const int32_t> tokens(int32_t block) const;

 private:
  struct Entry {
    uint64_t hash = 0;
    Link parent;
    uint32_t epoch = 0;
    int32_t length = 0;  // tokens held: block_size, or fewer for a leaf
    bool published = false;
    bool leaf = false;
    bool idle = false;
    int32_t prev = -1;  // idle order: older neighbour
    int32_t next = -1;  // newer neighbour
  };
  void Unlink(int32_t block);
  uint64_t LeafKey(Link parent, int32_t first_token) const;
  using Buckets = absl::flat_hash_map<uint64_t, absl::InlinedVector<int32_t, 1>>;
  // Removes `block` from map[key], dropping an emptied bucket.
  static void Erase(Buckets& map, uint64_t key, int32_t block);
  void Name(int32_t block, uint64_t hash, Link parent, absl::Span<const int32_t> tokens);

  const int block_size_;
  uint64_t hash_mask_ = ~uint64_t{0};
  std::vector<Entry> entries_;   // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks, block_size] of published blocks
  Buckets by_hash_;              // full blocks by chain hash
  Buckets by_first_;             // full blocks and leaves by LeafKey
  int32_t lru_head_ = -1;        // oldest idle block
  int32_t lru_tail_ = -1;        // newest
  int num_idle_ = 0;
  int num_published_ = 0;
  int num_leaves_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_PREFIX_INDEX_H_
