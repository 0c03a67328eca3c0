#include "engine/kv_cache/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace textgen {
namespace {

// F32 -> BF16 bits, round to nearest even (format/dtype.h's F32ToBF16; kv_cache may not
// depend on format).
uint16_t ToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheOptions& options) {
  absl::StatusOr<std::unique_ptr<BlockPool>> pool = BlockPool::Create(options);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<KvCache>(new KvCache(std::move(pool).value()));
}

int KvCache::BlocksFor(int64_t num_tokens) const {
  const int64_t bs = pool_->block_size();
  return static_cast<int>((num_tokens + bs - 1) / bs);
}

void KvCache::Release(int32_t block) {
  // The pool already asserted in debug builds; in release keep serving but leave a trace, since
  // a refcount bug here means some sequence's KV may be wrong.
  if (absl::Status s = pool_->DecRef(block); !s.ok()) {
    spdlog::error("KV cache refcount bug: {}", s.ToString());
  }
}

int KvCache::BlocksNeeded(const BlockTable& t, int n) const {
  if (n <= 0) return 0;
  const int bs = pool_->block_size();
  int needed = BlocksFor(static_cast<int64_t>(t.num_tokens) + n) - t.num_blocks();
  // The next slot lands in the current last block only if it is partly filled; if that block
  // is shared, writing it would change the other sequences' KV, so it must be copied first.
  if (t.num_tokens % bs != 0 && pool_->RefCount(t.blocks.back()) > 1) ++needed;
  return needed;
}

absl::Status KvCache::Append(BlockTable& t, int n) {
  assert(t.num_blocks() == BlocksFor(t.num_tokens));
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("Append of %d tokens", n));
  if (n == 0) return absl::OkStatus();
  if (n > INT_MAX - t.num_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Append of %d tokens to a %d-token sequence overflows", n, t.num_tokens));
  }
  const int needed = BlocksNeeded(t, n);
  const int bs = pool_->block_size();
  const bool cow = t.num_tokens % bs != 0 && pool_->RefCount(t.blocks.back()) > 1;
  if (needed > pool_->num_free()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "KV cache pool exhausted: appending %d tokens to a %d-token sequence needs %d blocks of "
        "%d tokens (%d for copy-on-write) but only %d of %d are free",
        n, t.num_tokens, needed, bs, cow ? 1 : 0, pool_->num_free(), pool_->num_total()));
  }
  // Take every block before touching `t`, so a failure (impossible after the check above while
  // single-threaded, but cheap to honour) leaves everything as it was.
  std::vector<int32_t> fresh;
  fresh.reserve(needed);
  for (int i = 0; i < needed; ++i) {
    absl::StatusOr<int32_t> b = pool_->Allocate();
    if (!b.ok()) {
      for (int32_t f : fresh) Release(f);
      return b.status();
    }
    fresh.push_back(*b);
  }
  auto next = fresh.begin();
  // A published block about to take new slots in place stops matching its name.
  if (t.num_tokens % bs != 0 && !cow) pool_->Unpublish(t.blocks.back());
  if (cow) {
    const int32_t shared = t.blocks.back();
    pool_->CopyBlock(shared, *next);
    t.blocks.back() = *next++;
    Release(shared);  // others still hold it: refcount was > 1
  }
  t.blocks.insert(t.blocks.end(), next, fresh.end());
  t.num_tokens += n;
  assert(t.num_blocks() == BlocksFor(t.num_tokens));
  return absl::OkStatus();
}

BlockTable KvCache::Fork(const BlockTable& t) {
  BlockTable child;
  child.blocks = t.blocks;
  child.num_tokens = t.num_tokens;
  for (int32_t b : child.blocks) {
    if (absl::Status s = pool_->IncRef(b); !s.ok()) {
      spdlog::error("KV cache refcount bug in Fork: {}", s.ToString());
    }
  }
  return child;
}

void KvCache::Free(BlockTable& t) {
  for (auto it = t.blocks.rbegin(); it != t.blocks.rend(); ++it) Release(*it);
  t.blocks.clear();
  t.num_tokens = 0;
}

void KvCache::Truncate(BlockTable& t, int num_tokens) {
  assert(num_tokens >= 0 && num_tokens <= t.num_tokens);
  num_tokens = std::clamp(num_tokens, 0, t.num_tokens);
  const int keep = BlocksFor(num_tokens);
  for (int i = t.num_blocks() - 1; i >= keep; --i) Release(t.blocks[i]);
  t.blocks.resize(keep);
  t.num_tokens = num_tokens;
}

absl::Status KvCache::Rollback(BlockTable& t, int num_tokens) {
  if (num_tokens < 0 || num_tokens > t.num_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache rollback of a %d-token sequence to %d tokens", t.num_tokens, num_tokens));
  }
  const int bs = pool_->block_size();
  const int keep = BlocksFor(num_tokens);
  for (int i = keep; i < t.num_blocks(); ++i) {
    if (pool_->RefCount(t.blocks[i]) == 1) pool_->Unpublish(t.blocks[i]);
  }
  // The cut block's name matters only if it covers rows past the cut (a leaf within the kept
  // rows, e.g. a session's published tail rolled back by nothing, stays).
  const PrefixIndex* index = pool_->prefix_index();
  const int kept_rows = num_tokens - (keep - 1) * bs;
  if (index != nullptr && num_tokens % bs != 0) {
    const int32_t cut = t.blocks[keep - 1];
    if (pool_->RefCount(cut) == 1 && index->published(cut) &&
        static_cast<int>(index->tokens(cut).size()) > kept_rows) {
      pool_->Unpublish(cut);
    }
  }
  Truncate(t, num_tokens);
  return absl::OkStatus();
}

void KvCache::DropFront(BlockTable& t, int n_blocks_to_drop, int keep_blocks) {
  assert(n_blocks_to_drop >= 0 && keep_blocks >= 0);
  assert(static_cast<int64_t>(keep_blocks) + n_blocks_to_drop <= t.num_blocks());
  keep_blocks = std::clamp(keep_blocks, 0, t.num_blocks());
  n_blocks_to_drop = std::clamp(n_blocks_to_drop, 0, t.num_blocks() - keep_blocks);
  if (n_blocks_to_drop == 0) return;
  const int bs = pool_->block_size();
  const int end = keep_blocks + n_blocks_to_drop;
  // Tokens actually stored in the dropped range: the last block may be partly filled.
  const int dropped_tokens =
      static_cast<int>(std::min<int64_t>(t.num_tokens, static_cast<int64_t>(end) * bs) -
                       static_cast<int64_t>(keep_blocks) * bs);
  for (int i = keep_blocks; i < end; ++i) Release(t.blocks[i]);
  t.blocks.erase(t.blocks.begin() + keep_blocks, t.blocks.begin() + end);
  t.num_tokens -= dropped_tokens;
  assert(t.num_blocks() == BlocksFor(t.num_tokens));
}

void KvCache::EnablePrefixCache(uint64_t seed) {
  pool_->EnablePrefixIndex();
  prefix_seed_ = seed;
}

template <typename Visit>
void KvCache::WalkPrefix(absl::Span<const int32_t> tokens, int max_blocks, Visit visit) const {
  const PrefixIndex* index = pool_->prefix_index();
  if (index == nullptr) return;
  const size_t bs = static_cast<size_t>(pool_->block_size());
  const size_t n =
      std::min<size_t>(tokens.size() / bs, static_cast<size_t>(std::max(0, max_blocks)));
  uint64_t hash = prefix_seed_;
  PrefixIndex::Link link;
  for (size_t j = 0; j < n; ++j) {
    const absl::Span<const int32_t> block_tokens = tokens.subspan(j * bs, bs);
    hash = index->ChainHash(hash, block_tokens);
    const int32_t next =
        visit(static_cast<int>(j), index->Find(hash, link, block_tokens), hash, link, block_tokens);
    if (next < 0) return;
    link = index->LinkTo(next);
  }
}

BlockTable KvCache::MatchPrefix(absl::Span<const int32_t> tokens, int max_blocks, int copy_above) {
  BlockTable t;
  WalkPrefix(tokens, max_blocks, [&](int, int32_t found, uint64_t, PrefixIndex::Link, auto) {
    if (found >= 0) t.blocks.push_back(found);
    return found;
  });
  // Referenced only after the walk: taking an idle block back changes no name, but keeping the
  // walk free of side effects makes it the same as PeekPrefix's.
  for (int32_t b : t.blocks) {
    if (absl::Status s = pool_->IncRef(b); !s.ok()) {
      spdlog::error("KV cache refcount bug in MatchPrefix: {}", s.ToString());
    }
  }
  t.num_tokens = t.num_blocks() * pool_->block_size();
  if (t.num_blocks() < max_blocks && disk_ != nullptr) ExtendFromDisk(t, tokens, max_blocks);
  if (t.num_blocks() < max_blocks && prefix_cache_enabled()) {
    const int whole = t.num_tokens;
    CopyLeaf(t, tokens.subspan(t.num_tokens), copy_above);
    if (t.num_tokens == whole && disk_ != nullptr) LeafFromDisk(t, tokens, copy_above);
  }
  return t;
}

void KvCache::CopyLeaf(BlockTable& t, absl::Span<const int32_t> rest, int min_tokens) {
  const PrefixIndex& index = *pool_->prefix_index();
  const PrefixIndex::Link link = t.empty() ? PrefixIndex::Link{} : index.LinkTo(t.blocks.back());
  const PrefixIndex::LeafMatch leaf = index.FindPartial(link, rest);
  if (leaf.block < 0 || t.num_tokens + leaf.tokens <= min_tokens) return;
  // Held while a block is taken, so that the allocation cannot evict the leaf itself.
  if (!pool_->IncRef(leaf.block).ok()) return;
  absl::StatusOr<int32_t> fresh = pool_->Allocate();
  if (fresh.ok()) {
    // Whole block: the rows past the match are stale for `t` but never read (they lie past
    // t.num_tokens until Append hands them out and the model overwrites them).
    pool_->CopyBlock(leaf.block, *fresh);
    t.blocks.push_back(*fresh);
    t.num_tokens += leaf.tokens;
  }
  Release(leaf.block);
}

void KvCache::SetDiskStore(KvDiskStore* store) {
  disk_ = prefix_cache_enabled() ? store : nullptr;
  if (disk_ == nullptr) {
    pool_->SetEvictionHook(nullptr);
    return;
  }
  pool_->SetEvictionHook([this](int32_t block) { Spill(block, /*wait=*/false); });
}

bool KvCache::ChainOf(int32_t block, std::vector<int32_t>* chain) const {
  const PrefixIndex& index = *pool_->prefix_index();
  std::vector<int32_t> path;  // the block, its parent, ... the chain's first
  int32_t b = block;
  while (true) {
    path.push_back(b);
    const PrefixIndex::Link link = index.parent(b);
    if (link.parent == PrefixIndex::kRoot) break;
    const int32_t p = link.parent;
    if (p < 0 || p >= pool_->num_total() || !index.published(p) || index.leaf(p) ||
        !(index.LinkTo(p) == link) || path.size() > static_cast<size_t>(pool_->num_total())) {
      return false;
    }
    b = p;
  }
  chain->clear();
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const absl::Span<const int32_t> tokens = index.tokens(*it);
    chain->insert(chain->end(), tokens.begin(), tokens.end());
  }
  return true;
}

bool KvCache::Spill(int32_t block, bool wait) {
  const PrefixIndex* index = pool_->prefix_index();
  if (disk_ == nullptr || index == nullptr || !index->published(block)) return false;
  // A leaf (a partly filled last block) too: its chain ends with fewer than block_size tokens,
  // over which its key is taken (LeafFromDisk looks it up so).
  if (!ChainOf(block, &chain_scratch_)) return false;
  const size_t bs = static_cast<size_t>(pool_->block_size());
  const absl::Span<const int32_t> chain = chain_scratch_;
  uint64_t key = disk_->RootKey();
  for (size_t j = 0; j < chain.size(); j += bs)
    key = KvDiskStore::ChainKey(key, chain.subspan(j, bs));
  return disk_->Enqueue(key, chain, pool_->BlockData(block), wait);
}

int KvCache::SpillIdleToDisk() {
  const PrefixIndex* index = pool_->prefix_index();
  if (disk_ == nullptr || index == nullptr) return 0;
  // Oldest first, so that the newest end up the most recently used on disk; but only as many
  // of the newest as the cap can hold (older ones would be written only to be deleted).
  int idle = 0;
  for (int32_t b = index->Oldest(); b >= 0; b = index->NewerIdle(b)) ++idle;
  const int64_t fit = disk_->max_bytes() / static_cast<int64_t>(pool_->payload_bytes());
  int64_t skip = std::max<int64_t>(0, idle - fit);
  int queued = 0;
  for (int32_t b = index->Oldest(); b >= 0; b = index->NewerIdle(b)) {
    if (skip > 0) {
      --skip;
      continue;
    }
    if (Spill(b, /*wait=*/true)) ++queued;
  }
  return queued;
}

void KvCache::ExtendFromDisk(BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks) {
  PrefixIndex& index = *pool_->prefix_index();
  const size_t bs = static_cast<size_t>(pool_->block_size());
  const size_t n =
      std::min<size_t>(tokens.size() / bs, static_cast<size_t>(std::max(0, max_blocks)));
  uint64_t key = disk_->RootKey();
  uint64_t hash = prefix_seed_;
  for (size_t j = 0; j < static_cast<size_t>(t.num_blocks()); ++j) {
    key = KvDiskStore::ChainKey(key, tokens.subspan(j * bs, bs));
    hash = index.ChainHash(hash, tokens.subspan(j * bs, bs));
  }
  PrefixIndex::Link link = t.empty() ? PrefixIndex::Link{} : index.LinkTo(t.blocks.back());
  for (size_t j = t.num_blocks(); j < n; ++j) {
    const absl::Span<const int32_t> block_tokens = tokens.subspan(j * bs, bs);
    key = KvDiskStore::ChainKey(key, block_tokens);
    hash = index.ChainHash(hash, block_tokens);
    if (!disk_->Contains(key)) return;
    absl::StatusOr<int32_t> fresh = pool_->Allocate();
    if (!fresh.ok()) return;
    if (!disk_->Read(key, tokens.first((j + 1) * bs), pool_->BlockData(*fresh)).ok()) {
      Release(*fresh);
      return;
    }
    // Published like a computed block, so that the next request finds it in memory. If the name
    // is taken (it cannot be: the walk in memory stopped before it), the block just stays
    // private to `t`.
    pool_->Publish(*fresh, hash, link, block_tokens);
    t.blocks.push_back(*fresh);
    t.num_tokens += static_cast<int>(bs);
    link = index.LinkTo(*fresh);
  }
}

void KvCache::LeafFromDisk(BlockTable& t, absl::Span<const int32_t> tokens, int min_tokens) {
  const size_t bs = static_cast<size_t>(pool_->block_size());
  const absl::Span<const int32_t> rest = tokens.subspan(static_cast<size_t>(t.num_tokens));
  uint64_t key = disk_->RootKey();
  for (size_t j = 0; j < static_cast<size_t>(t.num_blocks()); ++j) {
    key = KvDiskStore::ChainKey(key, tokens.subspan(j * bs, bs));
  }
  // The longest partly filled block on disk that the next tokens start with: a conversation's
  // last turn ended inside a block, and the next turn's prompt goes on past it. Its name is the
  // chain's key over its tokens (Spill names it so), so each length is one lookup in memory.
  for (size_t len = std::min(rest.size(), bs - 1); len >= 1; --len) {
    if (t.num_tokens + static_cast<int>(len) <= min_tokens) return;
    const uint64_t leaf = KvDiskStore::ChainKey(key, rest.first(len));
    if (!disk_->Contains(leaf)) continue;
    absl::StatusOr<int32_t> fresh = pool_->Allocate();
    if (!fresh.ok()) return;
    const size_t held = static_cast<size_t>(t.num_tokens) + len;
    if (!disk_->Read(leaf, tokens.first(held), pool_->BlockData(*fresh)).ok()) {
      Release(*fresh);
      return;
    }
    // Private to `t`, as CopyLeaf's copy: the rows past `len` are stale and never read.
    t.blocks.push_back(*fresh);
    t.num_tokens = static_cast<int>(held);
    return;
  }
}

KvCache::PrefixPeek KvCache::PeekPrefix(absl::Span<const int32_t> tokens, int max_blocks) const {
  PrefixPeek peek;
  WalkPrefix(tokens, max_blocks, [&](int, int32_t found, uint64_t, PrefixIndex::Link, auto) {
    if (found >= 0) {
      ++peek.blocks;
      if (pool_->RefCount(found) > 0) ++peek.live;
    }
    return found;
  });
  return peek;
}

void KvCache::PublishPrefix(const BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks) {
  if (!prefix_cache_enabled()) return;
  const int full = std::min<int>(max_blocks, t.num_tokens / pool_->block_size());
  WalkPrefix(tokens.first(std::min<size_t>(tokens.size(), t.num_tokens)), full,
             [&](int j, int32_t found, uint64_t hash, PrefixIndex::Link link,
                 absl::Span<const int32_t> block_tokens) {
               if (found >= 0) return found;  // this prefix is published already
               const int32_t own = t.blocks[j];
               return pool_->Publish(own, hash, link, block_tokens) ? own : -1;
             });
}

void KvCache::PublishTail(const BlockTable& t, absl::Span<const int32_t> tokens, int max_blocks) {
  if (!prefix_cache_enabled()) return;
  PublishPrefix(t, tokens, max_blocks);
  const int bs = pool_->block_size();
  const int j = t.num_tokens / bs;  // the partly filled block's index
  if (t.num_tokens % bs == 0 || j >= max_blocks || tokens.size() < size_t(t.num_tokens)) return;
  // The leaf hangs under the published chain of the blocks before it (whichever blocks hold
  // those tokens: equal tokens give equal K/V).
  int walked = 0;
  int32_t last = -1;
  WalkPrefix(tokens, j, [&](int, int32_t found, uint64_t, PrefixIndex::Link, auto) {
    if (found >= 0) {
      ++walked;
      last = found;
    }
    return found;
  });
  if (walked < j) return;
  const PrefixIndex::Link link = j == 0 ? PrefixIndex::Link{} : pool_->prefix_index()->LinkTo(last);
  pool_->PublishLeaf(t.blocks[j], link, tokens.subspan(size_t(j) * bs, t.num_tokens - j * bs));
}

float* KvCache::Slot(const BlockTable& t, int layer, int kv_head, int slot, bool value) {
  assert(slot >= 0 && slot < t.num_tokens);
  const int bs = pool_->block_size();
  const int32_t block = t.BlockOf(slot, bs);
  float* tile = value ? pool_->Value(block, layer, kv_head) : pool_->Key(block, layer, kv_head);
  return tile + static_cast<size_t>(BlockTable::OffsetOf(slot, bs)) * pool_->options().head_dim;
}

void KvCache::StoreKv(const BlockTable& t, int layer, int slot, const float* k, const float* v) {
  const int bs = pool_->block_size();
  const int64_t hd = pool_->options().head_dim;
  const int32_t block = t.BlockOf(slot, bs);
  const int64_t off = BlockTable::OffsetOf(slot, bs);
  for (int h = 0; h < pool_->options().n_kv_heads; ++h) {
    const float* kh = k + h * hd;
    const float* vh = v + h * hd;
    if (pool_->type() == KvType::kBf16) {
      uint16_t* kt = pool_->KeyBf16(block, layer, h) + off;  // column `off` of Kᵀ
      uint16_t* vr = pool_->ValueBf16(block, layer, h) + off * hd;
      for (int64_t d = 0; d < hd; ++d) kt[d * bs] = ToBf16(kh[d]);
      for (int64_t d = 0; d < hd; ++d) vr[d] = ToBf16(vh[d]);
    } else {
      float* kt = pool_->Key(block, layer, h) + off;
      for (int64_t d = 0; d < hd; ++d) kt[d * bs] = kh[d];
      std::memcpy(pool_->Value(block, layer, h) + off * hd, vh, hd * sizeof(float));
    }
  }
}

}  // namespace textgen
