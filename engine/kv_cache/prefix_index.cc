#include "engine/kv_cache/prefix_index.h"

#include <algorithm>
#include <cassert>

#include "engine/util/mix64.h"

namespace textgen {

PrefixIndex::PrefixIndex(int num_blocks, int block_size)
    : block_size_(block_size),
      entries_(num_blocks),
      tokens_(static_cast<size_t>(num_blocks) * block_size) {}

uint64_t PrefixIndex::ChainHash(uint64_t parent, absl::Span<const int32_t> tokens) const {
  uint64_t h = Mix64(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : tokens) h = Mix64(h ^ static_cast<uint32_t>(t));
  return h & hash_mask_;
}

absl::Span<const int32_t> PrefixIndex::tokens(int32_t block) const {
  return absl::MakeConstSpan(tokens_).subspan(static_cast<size_t>(block) * block_size_,
                                              entries_[block].length);
}

uint64_t PrefixIndex::LeafKey(Link parent, int32_t first_token) const {
  uint64_t h =
      Mix64(static_cast<uint64_t>(static_cast<uint32_t>(parent.parent)) << 32 | parent.epoch);
  return Mix64(h ^ static_cast<uint32_t>(first_token)) & hash_mask_;
}

int32_t PrefixIndex::Find(uint64_t hash, Link parent, absl::Span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  for (int32_t b : it->second) {
    const Entry& e = entries_[b];
    if (e.parent == parent &&
        std::equal(tokens.begin(), tokens.end(), this->tokens(b).begin(), this->tokens(b).end())) {
      return b;
    }
  }
  return -1;
}

bool PrefixIndex::Publish(int32_t block, uint64_t hash, Link parent,
                          absl::Span<const int32_t> tokens) {
  assert(static_cast<int>(tokens.size()) == block_size_);
  if (entries_[block].published || Find(hash, parent, tokens) >= 0) return false;
  Name(block, hash, parent, tokens);
  by_hash_[hash].push_back(block);
  by_first_[LeafKey(parent, tokens[0])].push_back(block);
  return true;
}

void PrefixIndex::Name(int32_t block, uint64_t hash, Link parent,
                       absl::Span<const int32_t> tokens) {
  Entry& e = entries_[block];
  e.published = true;
  e.hash = hash;
  e.parent = parent;
  e.length = static_cast<int32_t>(tokens.size());
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<size_t>(block) * block_size_);
  ++num_published_;
}

bool PrefixIndex::PublishLeaf(int32_t block, Link parent, absl::Span<const int32_t> tokens) {
  assert(!tokens.empty() && static_cast<int>(tokens.size()) < block_size_);
  if (tokens.empty() || static_cast<int>(tokens.size()) >= block_size_) return false;
  if (entries_[block].published) return false;
  const uint64_t key = LeafKey(parent, tokens[0]);
  int same_parent = 0;  // leaves
  static const absl::InlinedVector<int32_t, 1> kNone;
  auto it = by_first_.find(key);
  for (int32_t b : it == by_first_.end() ? kNone : it->second) {
    if (!(entries_[b].parent == parent)) continue;  // a forced key collision
    if (entries_[b].leaf) ++same_parent;
    absl::Span<const int32_t> have = this->tokens(b);
    if (have.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), have.begin())) {
      return false;  // covered: it (leaf or full) serves every match this one would
    }
  }
  if (same_parent >= kMaxLeavesPerKey) return false;
  Name(block, key, parent, tokens);
  entries_[block].leaf = true;
  by_first_[key].push_back(block);
  ++num_leaves_;
  return true;
}

PrefixIndex::LeafMatch PrefixIndex::FindPartial(Link parent,
                                                absl::Span<const int32_t> tokens) const {
  LeafMatch best;
  if (tokens.empty()) return best;
  auto it = by_first_.find(LeafKey(parent, tokens[0]));
  if (it == by_first_.end()) return best;
  for (int32_t b : it->second) {
    if (!(entries_[b].parent == parent)) continue;
    absl::Span<const int32_t> have = this->tokens(b);
    const size_t n = std::min(have.size(), tokens.size());
    const int common = static_cast<int>(
        std::mismatch(have.begin(), have.begin() + n, tokens.begin()).first - have.begin());
    if (common > best.tokens) best = {b, common};
  }
  return best;
}

void PrefixIndex::Unpublish(int32_t block) {
  Entry& e = entries_[block];
  if (!e.published) return;
  if (e.idle) MarkUsed(block);
  const uint64_t key = LeafKey(e.parent, tokens(block)[0]);
  if (!e.leaf) Erase(by_hash_, e.hash, block);
  Erase(by_first_, key, block);
  if (e.leaf) --num_leaves_;
  e.published = false;
  e.leaf = false;
  e.length = 0;
  ++e.epoch;
  --num_published_;
}

void PrefixIndex::Erase(Buckets& map, uint64_t key, int32_t block) {
  auto it = map.find(key);
  assert(it != map.end());
  auto& bucket = it->second;
  bucket.erase(std::find(bucket.begin(), bucket.end(), block));
  if (bucket.empty()) map.erase(it);
}

void PrefixIndex::MarkIdle(int32_t block) {
  Entry& e = entries_[block];
  assert(e.published && !e.idle);
  e.idle = true;
  e.prev = lru_tail_;
  e.next = -1;
  if (lru_tail_ >= 0) {
    entries_[lru_tail_].next = block;
  } else {
    lru_head_ = block;
  }
  lru_tail_ = block;
  ++num_idle_;
}

void PrefixIndex::MarkUsed(int32_t block) {
  assert(entries_[block].idle);
  Unlink(block);
  entries_[block].idle = false;
  --num_idle_;
}

void PrefixIndex::Unlink(int32_t block) {
  Entry& e = entries_[block];
  if (e.prev >= 0) {
    entries_[e.prev].next = e.next;
  } else {
    lru_head_ = e.next;
  }
  if (e.next >= 0) {
    entries_[e.next].prev = e.prev;
  } else {
    lru_tail_ = e.prev;
  }
  e.prev = e.next = -1;
}

void PrefixIndex::SetHashBitsForTesting(int bits) {
  bits = std::clamp(bits, 1, 64);
  hash_mask_ = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

}  // namespace textgen
