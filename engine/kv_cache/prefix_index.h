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
  // Forgets the block's name (its epoch grows); an idle block leaves the LRU order (the caller
  // frees it). No-op for unpublished blocks.
  void Unpublish(int32_t block);
  bool published(int32_t block) const { return entries_[block].published; }
  // The link a child of `block` is published under.
  Link LinkTo(int32_t block) const { return {block, entries_[block].epoch}; }

  // Idle order. MarkIdle: a published block's last reference went (it becomes the newest);
  // MarkUsed: it is referenced again. Oldest: the next to evict, -1 if none.
  void MarkIdle(int32_t block);
  void MarkUsed(int32_t block);
  bool idle(int32_t block) const { return entries_[block].idle; }
  int32_t Oldest() const { return lru_head_; }
  int num_idle() const { return num_idle_; }
  int num_published() const { return num_published_; }

  // Keeps only the low `bits` (1..64) of every chain hash, so that different blocks collide.
  void SetHashBitsForTesting(int bits);

  // For invariant tests: the block's name as published.
  uint64_t hash(int32_t block) const { return entries_[block].hash; }
  Link parent(int32_t block) const { return entries_[block].parent; }
  absl::Span<const int32_t> tokens(int32_t block) const;

 private:
  struct Entry {
    uint64_t hash = 0;
    Link parent;
    uint32_t epoch = 0;
    bool published = false;
    bool idle = false;
    int32_t prev = -1;  // idle order: older neighbour
    int32_t next = -1;  // newer neighbour
  };
  void Unlink(int32_t block);

  const int block_size_;
  uint64_t hash_mask_ = ~uint64_t{0};
  std::vector<Entry> entries_;   // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks, block_size] of published blocks
  absl::flat_hash_map<uint64_t, absl::InlinedVector<int32_t, 1>> by_hash_;
  int32_t lru_head_ = -1;  // oldest idle block
  int32_t lru_tail_ = -1;  // newest
  int num_idle_ = 0;
  int num_published_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_KV_CACHE_PREFIX_INDEX_H_
