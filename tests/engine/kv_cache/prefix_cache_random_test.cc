// Randomized invariant test of the prefix cache (KvCache::MatchPrefix / PublishPrefix over
// BlockPool's PrefixIndex): random sequences share prefixes, are extended, forked, truncated,
// freed (after publishing their partly filled tail as a leaf, as a finished request does), and
// have blocks unpublished (as the context shift does), in a pool small enough that
// idle blocks are evicted all the time, with hash collisions forced. Every slot holds a
// signature of the whole token prefix up to it, so a block matched or kept under a wrong name,
// or written while shared, shows as a wrong signature. After each step: every reference count
// against the live tables, the free / idle / live partition of the pool, every published
// block's name against its contents, and every live slot's signature.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv_cache/kv_cache.h"

namespace textgen {
namespace prefix_cache_random_test {

constexpr int kBs = 4;
constexpr int kBlocks = 24;
constexpr int kMaxSeqs = 8;

// A tiny pool: 1 layer, 1 KV head, head_dim 2 (room for one 64-bit signature per slot).
std::unique_ptr<KvCache> MakeCache(int blocks) {
  return std::move(KvCache::Create({.n_layers = 1,
                                    .n_kv_heads = 1,
                                    .head_dim = 2,
                                    .block_size = kBs,
                                    .num_blocks = blocks}))
      .value();
}

// The signature of slots [0, n) of a sequence of `tokens`: a rolling hash, one per slot.
uint64_t NextSig(uint64_t prev, int32_t token) {
  uint64_t x = (prev ^ static_cast<uint64_t>(token + 1)) * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 29);
}

struct Seq {
  BlockTable table;
  std::vector<int32_t> tokens;  // [table.num_tokens]
};

struct Coverage {
  int matched_blocks = 0;
  int evictions = 0;
  int unpublished = 0;
  int forks = 0;
  int truncates = 0;
  int collisions = 0;   // published blocks that share a hash with another
  int leaves = 0;       // leaves in the index, summed over checks
  int leaf_copies = 0;  // matches that ended in a copied leaf
};

class Harness {
 public:
  Harness(uint32_t seed, int hash_bits) : rng_(seed) {
    cache_ = MakeCache(kBlocks);
    cache_->EnablePrefixCache(seed);
    cache_->pool().prefix_index()->SetHashBitsForTesting(hash_bits);
  }
  ~Harness() {
    for (Seq& s : seqs_) cache_->Free(s.table);
  }

  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A few shared starts and a two-token alphabet make long common prefixes likely.
  std::vector<int32_t> RandomTokens(int n) {
    std::vector<int32_t> t;
    const int base = Rand(0, 2);
    for (int i = 0; i < n; ++i) t.push_back(i < 6 ? (base + i) % 3 : Rand(0, 1));
    return t;
  }

  // Writes signatures of s.tokens into slots [from, num_tokens) (K row 0 of the pool's view).
  void Write(Seq& s, int from) {
    uint64_t sig = from == 0 ? 0 : ReadSig(s.table, from - 1);
    for (int p = from; p < s.table.num_tokens; ++p) {
      sig = NextSig(sig, s.tokens[p]);
      std::memcpy(cache_->KeySlot(s.table, 0, 0, p), &sig, sizeof(sig));
    }
  }
  uint64_t ReadSig(const BlockTable& t, int slot) const {
    uint64_t sig;
    std::memcpy(&sig, cache_->KeySlot(t, 0, 0, slot), sizeof(sig));
    return sig;
  }
  static uint64_t ExpectedSig(const std::vector<int32_t>& tokens, int upto) {
    uint64_t sig = 0;
    for (int p = 0; p <= upto; ++p) sig = NextSig(sig, tokens[p]);
    return sig;
  }

  // Extends s by `extra` tokens if the pool allows; false if not.
  bool Extend(Seq& s, const std::vector<int32_t>& extra) {
    if (!cache_->CanAppend(s.table, static_cast<int>(extra.size()))) return false;
    const int from = s.table.num_tokens;
    if (!cache_->Append(s.table, static_cast<int>(extra.size())).ok()) return false;
    s.tokens.insert(s.tokens.end(), extra.begin(), extra.end());
    Write(s, from);
    cache_->PublishPrefix(s.table, s.tokens, INT_MAX);
    return true;
  }

  std::string Step() {
    const int op = Rand(0, 9);
    if (seqs_.size() < kMaxSeqs && (op <= 3 || seqs_.empty())) {
      // A new sequence: share what is published, compute the rest.
      std::vector<int32_t> tokens = RandomTokens(Rand(1, 20));
      Seq s;
      // As the engine does: the last token must run.
      const auto matchable = absl::MakeConstSpan(tokens).first(tokens.size() - 1);
      const KvCache::PrefixPeek peek = cache_->PeekPrefix(matchable, INT_MAX);
      s.table = cache_->MatchPrefix(matchable, INT_MAX);
      if (s.table.num_tokens / kBs != peek.blocks) return "MatchPrefix disagrees with PeekPrefix";
      if (s.table.num_tokens > static_cast<int>(matchable.size())) return "matched the last token";
      if (s.table.num_tokens % kBs != 0) {
        ++cov_.leaf_copies;
        // A copy is the table's own: nobody else may hold it.
        if (cache_->pool().RefCount(s.table.blocks.back()) != 1) return "copied leaf is shared";
      }
      cov_.matched_blocks += s.table.num_blocks();
      s.tokens.assign(tokens.begin(), tokens.begin() + s.table.num_tokens);
      if (std::string e = CheckSlots(s, "matched"); !e.empty()) return e;
      std::vector<int32_t> rest(tokens.begin() + s.table.num_tokens, tokens.end());
      if (!Extend(s, rest)) {
        cache_->Free(s.table);
        return "";
      }
      seqs_.push_back(std::move(s));
      return "";
    }
    if (seqs_.empty()) return "";
    Seq& s = seqs_[Rand(0, static_cast<int>(seqs_.size()) - 1)];
    switch (op) {
      case 4:
      case 5:
        Extend(s, RandomTokens(Rand(1, 6)));
        return "";
      case 6: {
        if (seqs_.size() >= kMaxSeqs) return "";
        Seq f;
        f.table = cache_->Fork(s.table);
        f.tokens = s.tokens;
        ++cov_.forks;
        seqs_.push_back(std::move(f));
        return "";
      }
      case 7: {
        const int n = Rand(0, s.table.num_tokens);
        cache_->Truncate(s.table, n);
        s.tokens.resize(n);
        ++cov_.truncates;
        return "";
      }
      case 8: {
        // As the context shift does before rotating a block in place.
        if (s.table.empty()) return "";
        const int32_t b = s.table.blocks[Rand(0, s.table.num_blocks() - 1)];
        if (cache_->pool().prefix_index()->published(b)) ++cov_.unpublished;
        cache_->pool().Unpublish(b);
        return "";
      }
      default: {
        const size_t i = &s - seqs_.data();
        if (Rand(0, 2) > 0) cache_->PublishTail(s.table, s.tokens, INT_MAX);
        cache_->Free(seqs_[i].table);
        seqs_.erase(seqs_.begin() + static_cast<std::ptrdiff_t>(i));
        return "";
      }
    }
  }

  std::string CheckSlots(const Seq& s, const char* what) const {
    for (int p = 0; p < s.table.num_tokens; ++p) {
      if (ReadSig(s.table, p) != ExpectedSig(s.tokens, p)) {
        return absl::StrCat(what, " sequence: slot ", p, " holds another prefix's K/V");
      }
    }
    return "";
  }

  std::string Check() {
    const BlockPool& pool = cache_->pool();
    const PrefixIndex& index = *pool.prefix_index();
    std::vector<int> refs(kBlocks, 0);
    for (const Seq& s : seqs_) {
      if (std::string e = CheckSlots(s, "live"); !e.empty()) return e;
      for (int32_t b : s.table.blocks) ++refs[b];
    }
    std::vector<int> on_free_list(kBlocks, 0);
    for (int32_t b : pool.free_blocks()) ++on_free_list[b];
    int idle = 0;
    std::map<uint64_t, int> hashes;
    for (int32_t b = 0; b < kBlocks; ++b) {
      if (pool.RefCount(b) != refs[b]) {
        return absl::StrCat("block ", b, " refcount ", pool.RefCount(b), ", tables hold ", refs[b]);
      }
      const bool published = index.published(b);
      if (index.idle(b)) ++idle;
      // Exactly one state: free (on the list once), idle (published), or live.
      if (refs[b] == 0 && on_free_list[b] + (index.idle(b) ? 1 : 0) != 1) {
        return absl::StrCat("unreferenced block ", b, " is neither free nor idle (or both)");
      }
      if (refs[b] > 0 && (on_free_list[b] != 0 || index.idle(b))) {
        return absl::StrCat("live block ", b, " is on the free list or idle");
      }
      if (index.idle(b) && !published) return absl::StrCat("idle block ", b, " unpublished");
      if (!published) continue;
      const int length = static_cast<int>(index.tokens(b).size());
      if (index.leaf(b) ? (length < 1 || length >= kBs) : length != kBs) {
        return absl::StrCat("published block ", b, " holds ", length, " tokens");
      }
      ++hashes[index.hash(b)];
      if (std::string e = CheckPublished(b); !e.empty()) return e;
    }
    for (const auto& [h, n] : hashes) cov_.collisions += n > 1 ? n : 0;
    if (idle != index.num_idle()) return "idle count drifted";
    cov_.leaves += index.num_leaves();
    if (pool.num_free() != static_cast<int>(pool.free_blocks().size()) + idle) {
      return "num_free is not free + idle";
    }
    cov_.evictions = static_cast<int>(pool.evictions());
    return "";
  }

  // A published block whose parent chain is still current must hold exactly the K/V of the
  // tokens along that chain: a wrong name would serve another prefix's K/V.
  std::string CheckPublished(int32_t b) const {
    const PrefixIndex& index = *cache_->pool().prefix_index();
    std::vector<int32_t> chain{b};
    for (PrefixIndex::Link l = index.parent(b); l.parent != PrefixIndex::kRoot;
         l = index.parent(l.parent)) {
      // A stale link: the parent was renamed, so this block can never be reached. Fine.
      if (!index.published(l.parent) || !(index.LinkTo(l.parent) == l)) return "";
      if (index.leaf(l.parent)) return absl::StrCat("block ", b, " hangs under a leaf");
      chain.push_back(l.parent);
    }
    std::reverse(chain.begin(), chain.end());
    std::vector<int32_t> tokens;
    for (int32_t c : chain) {
      absl::Span<const int32_t> t = index.tokens(c);
      tokens.insert(tokens.end(), t.begin(), t.end());
    }
    BlockTable view;  // not a reference holder: only read through, never freed
    view.blocks = chain;
    view.num_tokens = static_cast<int>(tokens.size());
    for (int p = 0; p < view.num_tokens; ++p) {
      if (ReadSig(view, p) != ExpectedSig(tokens, p)) {
        view.blocks.clear();
        return absl::StrCat("published block ", b, " does not hold what its name says");
      }
    }
    view.blocks.clear();
    return "";
  }

  Coverage cov_;

 private:
  std::mt19937 rng_;
  std::unique_ptr<KvCache> cache_;
  std::vector<Seq> seqs_;
};

TEST_CASE("prefix cache: random share / fork / free / evict keeps every count and block right",
          "[kv_cache][prefix]") {
  Coverage total;
  for (int hash_bits : {64, 2}) {
    for (uint32_t seed = 1; seed <= 60; ++seed) {
      Harness h(seed, hash_bits);
      for (int step = 0; step < 300; ++step) {
        std::string err = h.Step();
        if (err.empty()) err = h.Check();
        if (!err.empty()) {
          FAIL(absl::StrCat("hash bits ", hash_bits, ", seed ", seed, ", step ", step, ": ", err));
        }
      }
      total.matched_blocks += h.cov_.matched_blocks;
      total.evictions += h.cov_.evictions;
      total.unpublished += h.cov_.unpublished;
      total.forks += h.cov_.forks;
      total.truncates += h.cov_.truncates;
      total.collisions += h.cov_.collisions;
      total.leaves += h.cov_.leaves;
      total.leaf_copies += h.cov_.leaf_copies;
    }
  }
  // The mix must reach the paths it is about.
  CHECK(total.matched_blocks > 500);
  CHECK(total.evictions > 100);
  CHECK(total.unpublished > 50);
  CHECK(total.forks > 50);
  CHECK(total.truncates > 50);
  CHECK(total.collisions > 100);
  CHECK(total.leaves > 500);
  CHECK(total.leaf_copies > 200);
}

TEST_CASE("prefix cache: an idle block is kept until the pool needs it, oldest first",
          "[kv_cache][prefix]") {
  auto cache = MakeCache(4);
  cache->EnablePrefixCache(7);
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9};  // two whole blocks and one token
  BlockTable t;
  REQUIRE(cache->Append(t, 9).ok());
  cache->PublishPrefix(t, a, INT_MAX);
  const std::vector<int32_t> blocks = t.blocks;
  cache->Free(t);
  CHECK(cache->num_free_blocks() == 4);
  CHECK(cache->num_idle_blocks() == 2);
  // The whole chain is found again, the same blocks.
  BlockTable m = cache->MatchPrefix(a, 2);
  CHECK(m.num_tokens == 8);
  CHECK(m.blocks == std::vector<int32_t>{blocks[0], blocks[1]});
  CHECK(cache->num_idle_blocks() == 0);
  // A different first token matches nothing; max_blocks caps the match.
  CHECK(cache->MatchPrefix(std::vector<int32_t>{9, 2, 3, 4, 5}, 1).empty());
  BlockTable one = cache->MatchPrefix(a, 1);
  CHECK(one.num_blocks() == 1);
  cache->Free(one);
  cache->Free(m);
  // Freed tail first: the second block is older in the idle order and goes first.
  BlockTable big;
  REQUIRE(cache->Append(big, 3 * kBs).ok());  // 2 free + 1 evicted
  CHECK(cache->pool().evictions() == 1);
  CHECK(cache->PeekPrefix(a, 2).blocks == 1);
  REQUIRE(cache->Append(big, kBs).ok());
  CHECK(cache->pool().evictions() == 2);
  CHECK(cache->PeekPrefix(a, 2).blocks == 0);
  CHECK(cache->num_free_blocks() == 0);
  CHECK_FALSE(cache->Append(big, 1).ok());
  cache->Free(big);
}

TEST_CASE("prefix cache: a published block written in place is forgotten first",
          "[kv_cache][prefix]") {
  auto cache = MakeCache(8);
  cache->EnablePrefixCache(1);
  const std::vector<int32_t> a{1, 2, 3, 4, 5};
  BlockTable t;
  REQUIRE(cache->Append(t, 5).ok());
  cache->PublishPrefix(t, a, INT_MAX);
  CHECK(cache->PeekPrefix(a, 1).blocks == 1);
  // Shared: appending after a rollback copies the block; the published one stays.
  BlockTable other = cache->MatchPrefix(a, 1);
  cache->Truncate(t, 2);
  REQUIRE(cache->Append(t, 1).ok());
  CHECK(t.blocks[0] != other.blocks[0]);
  CHECK(cache->PeekPrefix(a, 1).blocks == 1);
  cache->Free(t);
  // Alone: appending writes it in place, so it leaves the index.
  cache->Truncate(other, 3);
  REQUIRE(cache->Append(other, 1).ok());
  CHECK(cache->PeekPrefix(a, 1).blocks == 0);
  cache->Free(other);
  CHECK(cache->num_idle_blocks() == 0);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("prefix cache: a partly filled tail is published as a leaf and matched by copy",
          "[kv_cache][prefix]") {
  auto cache = MakeCache(6);
  cache->EnablePrefixCache(3);
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // two blocks and 3 tokens
  BlockTable t;
  REQUIRE(cache->Append(t, 11).ok());
  cache->PublishTail(t, a, INT_MAX);
  const std::vector<int32_t> blocks = t.blocks;
  CHECK(cache->pool().prefix_index()->leaf(blocks[2]));
  cache->Free(t);
  CHECK(cache->num_idle_blocks() == 3);

  // The same conversation and more: two shared blocks, then 3 rows copied from the leaf.
  const std::vector<int32_t> longer{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  BlockTable m = cache->MatchPrefix(longer, INT_MAX);
  CHECK(m.num_tokens == 11);
  REQUIRE(m.num_blocks() == 3);
  CHECK(m.blocks[0] == blocks[0]);
  CHECK(m.blocks[2] != blocks[2]);  // a copy: the leaf stays as it was for others
  CHECK(cache->pool().RefCount(blocks[2]) == 0);
  CHECK(cache->pool().prefix_index()->idle(blocks[2]));
  // Diverging after 2 of the leaf's tokens: only those rows count.
  BlockTable d = cache->MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99}, 3);
  CHECK(d.num_tokens == 10);
  // Rows of a full block that goes on differently are copied the same way.
  BlockTable f = cache->MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 99}, INT_MAX);
  CHECK(f.num_tokens == 6);
  REQUIRE(f.num_blocks() == 2);
  CHECK(f.blocks[1] != blocks[1]);
  cache->Free(f);
  // max_blocks caps the leaf too; copy_above skips a copy that does not beat it.
  BlockTable capped = cache->MatchPrefix(longer, 2);
  CHECK(capped.num_tokens == 8);
  cache->Free(capped);
  BlockTable c = cache->MatchPrefix(longer, INT_MAX, /*copy_above=*/11);
  CHECK(c.num_tokens == 8);
  cache->Free(c);
  cache->Free(d);
  cache->Free(m);
  // A different first token in the tail block matches no leaf.
  BlockTable n = cache->MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 42}, INT_MAX);
  CHECK(n.num_tokens == 8);
  cache->Free(n);
  CHECK(cache->num_free_blocks() == 6);
}

TEST_CASE("prefix cache: copying a leaf never evicts the leaf itself", "[kv_cache][prefix]") {
  auto cache = MakeCache(3);
  cache->EnablePrefixCache(3);
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  BlockTable t;
  REQUIRE(cache->Append(t, 10).ok());
  cache->PublishTail(t, a, INT_MAX);
  cache->Free(t);
  CHECK(cache->num_idle_blocks() == 3);
  // The chain takes two idle blocks back; the only block left to allocate is the leaf.
  BlockTable m = cache->MatchPrefix(a, INT_MAX);
  CHECK(m.num_tokens == 8);
  CHECK(cache->pool().evictions() == 0);
  CHECK(cache->num_idle_blocks() == 1);
  cache->Free(m);
}

TEST_CASE("prefix cache: a leaf written in place by its owner is forgotten first",
          "[kv_cache][prefix]") {
  auto cache = MakeCache(4);
  cache->EnablePrefixCache(5);
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6};
  BlockTable t;
  REQUIRE(cache->Append(t, 6).ok());
  cache->PublishTail(t, a, INT_MAX);  // as a session's turn ends
  BlockTable m = cache->MatchPrefix(a, INT_MAX);
  CHECK(m.num_tokens == 6);
  cache->Free(m);
  REQUIRE(cache->Append(t, 1).ok());  // the next turn writes the tail block in place
  BlockTable after = cache->MatchPrefix(a, INT_MAX);
  CHECK(after.num_tokens == 4);
  cache->Free(after);
  cache->Free(t);
}

TEST_CASE("prefix cache: off until enabled", "[kv_cache][prefix]") {
  auto cache = MakeCache(4);
  const std::vector<int32_t> a{1, 2, 3, 4, 5};
  BlockTable t;
  REQUIRE(cache->Append(t, 5).ok());
  cache->PublishPrefix(t, a, INT_MAX);
  cache->Free(t);
  CHECK(cache->MatchPrefix(a, 1).empty());
  CHECK(cache->num_idle_blocks() == 0);
  CHECK(cache->pool().free_blocks().size() == 4);
}

}  // namespace prefix_cache_random_test
}  // namespace textgen
