// KvCache::Rollback as speculative decoding uses it: a verification pass appends the last
// token and k drafted ones, then the cache is rolled back past the first rejected draft. Every
// slot holds a signature of the token prefix up to it, so a block rewritten while shared or
// while published under its old tokens shows as a wrong signature.
#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv_cache/kv_cache.h"

namespace textgen {
namespace kv_cache_rollback_test {

constexpr int kBs = 4;

// 1 layer, 1 KV head, head_dim 2: room for one 64-bit signature per slot.
std::unique_ptr<KvCache> MakeCache(int blocks, bool prefix_cache) {
  auto cache = std::move(KvCache::Create({.n_layers = 1,
                                          .n_kv_heads = 1,
                                          .head_dim = 2,
                                          .block_size = kBs,
                                          .num_blocks = blocks}))
                   .value();
  if (prefix_cache) cache->EnablePrefixCache(17);
  return cache;
}

uint64_t NextSig(uint64_t prev, int32_t token) {
  uint64_t x = (prev ^ static_cast<uint64_t>(token + 1)) * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 29);
}

uint64_t ReadSig(const KvCache& cache, const BlockTable& t, int slot) {
  uint64_t sig;
  std::memcpy(&sig, cache.KeySlot(t, 0, 0, slot), sizeof(sig));
  return sig;
}

// The signature slot `upto` of a sequence of `tokens` must hold.
uint64_t ExpectedSig(absl::Span<const int32_t> tokens, int upto) {
  uint64_t sig = 0;
  for (int p = 0; p <= upto; ++p) sig = NextSig(sig, tokens[p]);
  return sig;
}

struct Seq {
  BlockTable table;
  std::vector<int32_t> tokens;  // [table.num_tokens]
};

// Appends `extra` to s and writes their signatures, as a forward pass does.
void Feed(KvCache& cache, Seq& s, const std::vector<int32_t>& extra) {
  const int from = s.table.num_tokens;
  REQUIRE(cache.Append(s.table, static_cast<int>(extra.size())).ok());
  s.tokens.insert(s.tokens.end(), extra.begin(), extra.end());
  uint64_t sig = from == 0 ? 0 : ReadSig(cache, s.table, from - 1);
  for (int p = from; p < s.table.num_tokens; ++p) {
    sig = NextSig(sig, s.tokens[p]);
    std::memcpy(cache.KeySlot(s.table, 0, 0, p), &sig, sizeof(sig));
  }
}

void RollbackTo(KvCache& cache, Seq& s, int n) {
  REQUIRE(cache.Rollback(s.table, n).ok());
  s.tokens.resize(n);
}

// "" if every slot of s holds its prefix's signature.
std::string CheckSlots(const KvCache& cache, const Seq& s) {
  for (int p = 0; p < s.table.num_tokens; ++p) {
    if (ReadSig(cache, s.table, p) != ExpectedSig(s.tokens, p)) {
      return absl::StrCat("slot ", p, " holds another prefix's K/V");
    }
  }
  return "";
}

// "" if every published block reachable from the root holds exactly the K/V of the tokens its
// chain of names spells (a name that lies would serve a wrong K/V to a later request).
std::string CheckPublished(const KvCache& cache) {
  const PrefixIndex* index = cache.pool().prefix_index();
  if (index == nullptr) return "";
  for (int32_t b = 0; b < cache.num_total_blocks(); ++b) {
    if (!index->published(b)) continue;
    std::vector<int32_t> chain{b};
    bool reachable = true;
    for (PrefixIndex::Link l = index->parent(b); l.parent != PrefixIndex::kRoot;
         l = index->parent(l.parent)) {
      if (!index->published(l.parent) || !(index->LinkTo(l.parent) == l)) {
        reachable = false;  // renamed parent: this block can never be matched again
        break;
      }
      chain.push_back(l.parent);
    }
    if (!reachable) continue;
    std::reverse(chain.begin(), chain.end());
    std::vector<int32_t> tokens;
    for (int32_t c : chain) {
      const absl::Span<const int32_t> t = index->tokens(c);
      tokens.insert(tokens.end(), t.begin(), t.end());
    }
    BlockTable view;  // read through only, never freed
    view.blocks = chain;
    view.num_tokens = static_cast<int>(tokens.size());
    std::string error;
    for (int p = 0; p < view.num_tokens && error.empty(); ++p) {
      if (ReadSig(cache, view, p) != ExpectedSig(tokens, p)) {
        error = absl::StrCat("published block ", b, " does not hold what its name says (row ",
                             p % kBs, ")");
      }
    }
    view.blocks.clear();
    if (!error.empty()) return error;
  }
  return "";
}

TEST_CASE("KvCache::Rollback: every block taken for rejected drafts goes back to the pool",
          "[kv_cache][rollback]") {
  auto cache = MakeCache(16, /*prefix_cache=*/false);
  for (int history = 1; history <= 3 * kBs; ++history) {
    for (int k = 1; k <= 6; ++k) {
      for (int accepted = 0; accepted <= k; ++accepted) {
        INFO("history " << history << ", k " << k << ", accepted " << accepted);
        Seq s;
        Feed(*cache, s, std::vector<int32_t>(history, 3));
        const int free_before = cache->num_free_blocks();
        std::vector<int32_t> verify(k + 1);
        for (int i = 0; i <= k; ++i) verify[i] = 10 + i;
        Feed(*cache, s, verify);  // the last token and k drafts
        RollbackTo(*cache, s, history + 1 + accepted);
        CHECK(s.table.num_blocks() == (history + 1 + accepted + kBs - 1) / kBs);
        CHECK(cache->num_free_blocks() ==
              free_before - (s.table.num_blocks() - (history + kBs - 1) / kBs));
        CHECK(CheckSlots(*cache, s).empty());
        RollbackTo(*cache, s, history);
        CHECK(cache->num_free_blocks() == free_before);
        cache->Free(s.table);
        CHECK(cache->num_free_blocks() == 16);
      }
    }
  }
}

TEST_CASE("KvCache::Rollback: a bad length changes nothing", "[kv_cache][rollback]") {
  auto cache = MakeCache(4, /*prefix_cache=*/true);
  Seq s;
  Feed(*cache, s, {1, 2, 3, 4, 5, 6});
  const std::vector<int32_t> blocks = s.table.blocks;
  CHECK(cache->Rollback(s.table, 7).code() == absl::StatusCode::kInvalidArgument);
  CHECK(cache->Rollback(s.table, -1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.table.num_tokens == 6);
  CHECK(s.table.blocks == blocks);
  CHECK(cache->Rollback(s.table, 6).ok());  // a no-op
  CHECK(s.table.blocks == blocks);
  CHECK(cache->Rollback(s.table, 0).ok());
  CHECK(s.table.empty());
  CHECK(cache->num_free_blocks() == 4);
}

TEST_CASE("KvCache::Rollback: a block shared with another sequence is copied, never written",
          "[kv_cache][rollback]") {
  auto cache = MakeCache(8, /*prefix_cache=*/false);
  Seq parent;
  Feed(*cache, parent, {1, 2, 3, 4, 5, 6, 7, 8});
  Seq child{cache->Fork(parent.table), parent.tokens};
  Feed(*cache, child, {20, 21, 22});  // a verification pass: its own third block
  // Everything rejected past slot 5: the cut lies inside the block both tables hold.
  RollbackTo(*cache, child, 6);
  CHECK(child.table.blocks[1] == parent.table.blocks[1]);
  CHECK(cache->pool().RefCount(parent.table.blocks[1]) == 2);
  CHECK(cache->num_free_blocks() == 6);
  Feed(*cache, child, {30, 31, 32});  // the next pass writes slots 6.. in a private copy
  CHECK(child.table.blocks[1] != parent.table.blocks[1]);
  CHECK(cache->pool().RefCount(parent.table.blocks[1]) == 1);
  CHECK(CheckSlots(*cache, parent).empty());
  CHECK(CheckSlots(*cache, child).empty());
  cache->Free(child.table);
  cache->Free(parent.table);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache::Rollback: rejected tokens leave the prefix cache", "[kv_cache][rollback]") {
  auto cache = MakeCache(8, /*prefix_cache=*/true);
  const PrefixIndex& index = *cache->pool().prefix_index();
  Seq s;
  Feed(*cache, s, {1, 2, 3, 4, 5, 6});
  cache->PublishPrefix(s.table, s.tokens, INT_MAX);  // block 0
  // The last token and four drafts, published as if they were final (a careless caller):
  // block 1 (slots 4-7) then names tokens 6 and 7, two drafts.
  Feed(*cache, s, {7, 40, 41, 42, 43});
  cache->PublishTail(s.table, s.tokens, INT_MAX);  // block 2 as a leaf
  const int32_t b1 = s.table.blocks[1];
  const int32_t b2 = s.table.blocks[2];
  REQUIRE(index.published(b1));
  REQUIRE(index.published(b2));
  RollbackTo(*cache, s, 7);                   // every draft rejected
  CHECK(index.published(s.table.blocks[0]));  // the prompt's block stays shareable
  CHECK_FALSE(index.published(b1));           // its name covers slot 7, a rejected draft
  CHECK_FALSE(index.published(b2));
  CHECK(cache->pool().RefCount(b2) == 0);
  CHECK_FALSE(index.idle(b2));  // free, not cached
  CHECK(cache->num_idle_blocks() == 0);
  // The accepted continuation is written in place and published under its own tokens.
  Feed(*cache, s, {8, 9, 10});
  cache->PublishPrefix(s.table, s.tokens, INT_MAX);
  CHECK(CheckPublished(*cache).empty());
  CHECK(CheckSlots(*cache, s).empty());
  const std::vector<int32_t> final_tokens = s.tokens;
  cache->PublishTail(s.table, s.tokens, INT_MAX);
  cache->Free(s.table);
  // A later request with those tokens shares the two whole blocks and copies the tail.
  BlockTable m = cache->MatchPrefix(final_tokens, INT_MAX);
  CHECK(m.num_tokens == 10);
  cache->Free(m);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache::Rollback: a published block another request holds keeps its name",
          "[kv_cache][rollback]") {
  auto cache = MakeCache(8, /*prefix_cache=*/true);
  const PrefixIndex& index = *cache->pool().prefix_index();
  Seq a;
  Feed(*cache, a, {1, 2, 3, 4, 5, 6, 7, 8});
  cache->PublishPrefix(a.table, a.tokens, INT_MAX);
  // b shares both blocks, then a session rollback cuts inside the second one.
  Seq b{cache->MatchPrefix(a.tokens, INT_MAX), a.tokens};
  REQUIRE(b.table.num_tokens == 8);
  RollbackTo(*cache, b, 6);
  CHECK(index.published(a.table.blocks[1]));
  Feed(*cache, b, {50, 51});
  CHECK(b.table.blocks[1] != a.table.blocks[1]);
  CHECK(CheckPublished(*cache).empty());
  CHECK(CheckSlots(*cache, a).empty());
  CHECK(CheckSlots(*cache, b).empty());
  // A rollback by nothing keeps a session's published tail.
  Seq c;
  Feed(*cache, c, {9, 9, 9, 9, 9, 9});
  cache->PublishTail(c.table, c.tokens, INT_MAX);
  REQUIRE(index.leaf(c.table.blocks[1]));
  RollbackTo(*cache, c, 6);
  CHECK(index.published(c.table.blocks[1]));
  RollbackTo(*cache, c, 5);  // now it names a row past the cut
  CHECK_FALSE(index.published(c.table.blocks[1]));
  for (Seq* s : {&a, &b, &c}) cache->Free(s->table);
  CHECK(cache->num_free_blocks() == 8);
}

// Random speculative decoding over several sequences sharing prefixes through the cache: each
// step feeds a sequence's last token and k drafts, publishes (sometimes carelessly, drafts
// included), rolls back past a random number of accepted drafts, then publishes what was
// accepted; sequences start from the prefix cache, fork, and finish with their tails
// published. After every step: reference counts, the free / idle / live partition, every
// slot's and every published block's signature, and that the blocks a rollback released are
// free (not cached) unless another table holds them.
class Harness {
 public:
  explicit Harness(uint32_t seed) : rng_(seed), cache_(MakeCache(kBlocks, true)) {}
  ~Harness() {
    for (Seq& s : seqs_) cache_->Free(s.table);
  }
  int Rand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string Step() {
    const int op = Rand(0, 9);
    if (seqs_.size() < 5 && (op <= 1 || seqs_.empty())) return Start();
    if (seqs_.empty()) return "";
    const size_t i = static_cast<size_t>(Rand(0, static_cast<int>(seqs_.size()) - 1));
    if (op == 2 && seqs_.size() < 5) {
      seqs_.push_back(Seq{cache_->Fork(seqs_[i].table), seqs_[i].tokens});
      return "";
    }
    if (op == 3 || seqs_[i].table.num_tokens > 60) {
      cache_->PublishTail(seqs_[i].table, seqs_[i].tokens, INT_MAX);
      cache_->Free(seqs_[i].table);
      seqs_.erase(seqs_.begin() + static_cast<std::ptrdiff_t>(i));
      return "";
    }
    return Speculate(seqs_[i]);
  }

  std::string Check() const {
    std::vector<int> refs(kBlocks, 0);
    for (const Seq& s : seqs_) {
      if (std::string e = CheckSlots(*cache_, s); !e.empty()) return e;
      for (int32_t b : s.table.blocks) ++refs[b];
    }
    const BlockPool& pool = cache_->pool();
    std::vector<int> on_free_list(kBlocks, 0);
    for (int32_t b : pool.free_blocks()) ++on_free_list[b];
    for (int32_t b = 0; b < kBlocks; ++b) {
      if (pool.RefCount(b) != refs[b]) return absl::StrCat("block ", b, " refcount is wrong");
      const int states = on_free_list[b] + (pool.prefix_index()->idle(b) ? 1 : 0);
      if (refs[b] == 0 ? states != 1 : states != 0) {
        return absl::StrCat("block ", b, " is leaked, or both free and live");
      }
    }
    return CheckPublished(*cache_);
  }

  int unpublished_by_rollback = 0;  // coverage
  int copies_on_write = 0;

 private:
  static constexpr int kBlocks = 64;

  std::vector<int32_t> Tokens(int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = Rand(0, 2);  // few ids: shared prefixes and repeats are common
    return t;
  }

  std::string Start() {
    if (cache_->num_free_blocks() < 8) return "";  // a prompt takes at most 5
    std::vector<int32_t> prompt = Tokens(Rand(2, 14));
    const auto matchable = absl::MakeConstSpan(prompt).first(prompt.size() - 1);
    Seq s{cache_->MatchPrefix(matchable, INT_MAX), {}};
    s.tokens.assign(prompt.begin(), prompt.begin() + s.table.num_tokens);
    if (std::string e = CheckSlots(*cache_, s); !e.empty()) return "matched " + e;
    Feed(*cache_, s, std::vector<int32_t>(prompt.begin() + s.table.num_tokens, prompt.end()));
    cache_->PublishPrefix(s.table, s.tokens, INT_MAX);
    seqs_.push_back(std::move(s));
    return "";
  }

  std::string Speculate(Seq& s) {
    const int k = Rand(1, 6);
    if (!cache_->CanAppend(s.table, k + 1)) return "";
    const int n = s.table.num_tokens;
    const int32_t last_block = s.table.empty() ? -1 : s.table.blocks.back();
    Feed(*cache_, s, Tokens(k + 1));  // the last sampled token and k drafts
    if (last_block >= 0 && n % kBs != 0 && s.table.blocks[(n - 1) / kBs] != last_block) {
      ++copies_on_write;  // the partial block was shared: copied before the write
    }
    if (Rand(0, 1) == 0) cache_->PublishPrefix(s.table, s.tokens, INT_MAX);  // careless
    const int keep = n + 1 + Rand(0, k);
    // Blocks only this table holds that the rollback cuts into (the first, if the cut is not on
    // a block boundary) or releases (the others).
    std::vector<int32_t> dropped;
    for (int j = keep / kBs; j < s.table.num_blocks(); ++j) {
      if (cache_->pool().RefCount(s.table.blocks[j]) == 1) dropped.push_back(s.table.blocks[j]);
    }
    const PrefixIndex& index = *cache_->pool().prefix_index();
    for (int32_t b : dropped) unpublished_by_rollback += index.published(b) ? 1 : 0;
    const int32_t cut = keep % kBs != 0 ? s.table.blocks[keep / kBs] : -1;
    RollbackTo(*cache_, s, keep);
    for (int32_t b : dropped) {
      if (!index.published(b)) continue;
      if (b != cut || index.tokens(b).size() > static_cast<size_t>(keep % kBs)) {
        return absl::StrCat("block ", b, " still names rejected tokens after the rollback");
      }
    }
    cache_->PublishPrefix(s.table, s.tokens, INT_MAX);  // what was accepted
    return "";
  }

  std::mt19937 rng_;
  std::unique_ptr<KvCache> cache_;
  std::vector<Seq> seqs_;
};

TEST_CASE(
    "KvCache::Rollback: random speculative steps leak nothing and publish no rejected "
    "token",
    "[kv_cache][rollback]") {
  int unpublished = 0, copies = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Harness h(seed);
    for (int step = 0; step < 300; ++step) {
      std::string err = h.Step();
      if (err.empty()) err = h.Check();
      if (!err.empty()) FAIL(absl::StrCat("seed ", seed, ", step ", step, ": ", err));
    }
    unpublished += h.unpublished_by_rollback;
    copies += h.copies_on_write;
  }
  // The mix must reach the paths it is about.
  CHECK(unpublished > 100);
  CHECK(copies > 20);
}

}  // namespace kv_cache_rollback_test
}  // namespace textgen
