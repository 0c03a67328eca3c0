// SequenceFeed on a small KV cache, with the model's part (appending a chunk's K/V) played by
// KvCache::Append: chunking under a budget, logits only for the chunk that ends the target, a
// cached prefix, preparing again, rolling back (the speculative pattern), restarting, the
// sliding window's drop, forks.
#include "engine/decoding/sequence_feed.h"

#include <catch2/catch.hpp>
#include <memory>
#include <numeric>
#include <vector>

#include "engine/kv_cache/kv_cache.h"

namespace textgen {
namespace sequence_feed_test {

constexpr int kBlock = 4;

std::unique_ptr<KvCache> SmallCache() {
  KvCacheOptions o;
  o.n_layers = 1;
  o.n_kv_heads = 1;
  o.head_dim = 4;
  o.block_size = kBlock;
  o.num_blocks = 16;
  auto c = KvCache::Create(o);
  REQUIRE(c.ok());
  return *std::move(c);
}

std::vector<int32_t> Iota(int n, int32_t from = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

// The pass ran: the model appended the prepared chunk's K/V.
void RunPass(KvCache& cache, SequenceFeed& f) {
  REQUIRE(cache.Append(f.table(), f.pending()).ok());
  f.Commit();
}

TEST_CASE("sequence feed: a prompt runs in chunks under the budget", "[sequence_feed]") {
  auto cache = SmallCache();
  SequenceFeed f(BlockTable(), Iota(10));
  CHECK(f.computed() == 0);
  CHECK(f.left() == 10);
  std::vector<ForwardSeq> seqs;
  CHECK(f.Prepare(0, &seqs) == 0);  // no budget: nothing added
  CHECK(seqs.empty());
  for (int expect : {4, 4, 2}) {
    seqs.clear();
    REQUIRE(f.Prepare(4, &seqs) == expect);
    REQUIRE(seqs.size() == 1);
    const ForwardSeq& s = seqs[0];
    CHECK(s.tokens.size() == static_cast<size_t>(expect));
    CHECK(s.tokens[0] == 100 + f.computed());
    CHECK(s.pos0 == f.computed());
    CHECK(s.table == &f.table());
    CHECK(s.logits == (expect == 2));  // only the chunk that ends the target
    CHECK_FALSE(s.all_logits);
    RunPass(*cache, f);
  }
  CHECK(f.complete());
  CHECK(f.computed() == 10);
  CHECK(f.pending() == 0);
  seqs.clear();
  CHECK(f.Prepare(100, &seqs) == 0);
  CHECK(seqs.empty());
  f.Append(7);  // a chosen token: one decode token left
  CHECK(f.left() == 1);
  seqs.clear();
  REQUIRE(f.Prepare(100, &seqs) == 1);
  CHECK(seqs[0].tokens[0] == 7);
  CHECK(seqs[0].logits);
  f.Free(*cache);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("sequence feed: a cached prefix is not run again", "[sequence_feed]") {
  auto cache = SmallCache();
  BlockTable cached;
  REQUIRE(cache->Append(cached, 6).ok());
  SequenceFeed f(std::move(cached), Iota(9));
  CHECK(f.computed() == 6);
  CHECK(f.left() == 3);
  std::vector<ForwardSeq> seqs;
  REQUIRE(f.Prepare(100, &seqs) == 3);
  CHECK(seqs[0].tokens[0] == 106);
  CHECK(seqs[0].pos0 == 6);
  // The pass did not run: preparing again gives the same chunk.
  seqs.clear();
  REQUIRE(f.Prepare(2, &seqs) == 2);
  CHECK(f.pending() == 2);
  CHECK(seqs[0].tokens[0] == 106);
  CHECK_FALSE(seqs[0].logits);
  RunPass(*cache, f);
  CHECK(f.left() == 1);
  // A catch-up chunk asks for no row even when it ends the target.
  seqs.clear();
  REQUIRE(f.Prepare(100, &seqs, SequenceFeed::Rows::kNone) == 1);
  CHECK_FALSE(seqs[0].logits);
  f.Free(*cache);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("sequence feed: verifying drafts and rolling back the rejected ones", "[sequence_feed]") {
  auto cache = SmallCache();
  SequenceFeed f(BlockTable(), Iota(5));
  std::vector<ForwardSeq> seqs;
  f.Prepare(100, &seqs);
  RunPass(*cache, f);
  // The last chosen token and three drafted ones run in one pass, a row for each.
  f.Append(50);
  f.Append({51, 52, 53});
  seqs.clear();
  REQUIRE(f.Prepare(100, &seqs, SequenceFeed::Rows::kAll) == 4);
  CHECK(seqs[0].all_logits);
  CHECK(seqs[0].logits);
  RunPass(*cache, f);
  CHECK(f.computed() == 9);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks() - 3);
  // One draft accepted: 52 and 53 leave the target and the table.
  const int k = 3;
  const int accepted = 1;
  f.Truncate(*cache, f.computed() - k + accepted);
  CHECK(f.computed() == 7);
  CHECK(f.target() == std::vector<int32_t>({100, 101, 102, 103, 104, 50, 51}));
  CHECK(cache->num_free_blocks() == cache->num_total_blocks() - 2);
  f.Append(60);  // the verifier's own token
  CHECK(f.left() == 1);
  // Truncating past what was computed shortens only the target.
  f.Truncate(*cache, 7);
  CHECK(f.complete());
  CHECK(f.computed() == 7);
  f.Free(*cache);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("sequence feed: restart, sliding-window drop and fork", "[sequence_feed]") {
  auto cache = SmallCache();
  SequenceFeed f(BlockTable(), Iota(12));
  std::vector<ForwardSeq> seqs;
  f.Prepare(100, &seqs);
  RunPass(*cache, f);
  // With the cache off every choice runs the whole target again.
  f.Restart(*cache);
  CHECK(f.computed() == 0);
  CHECK(f.left() == 12);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
  // The window drops one block after the first (kept) one.
  f.Drop(kBlock, kBlock);
  std::vector<int32_t> want = Iota(4);
  for (int32_t t : Iota(4, 108)) want.push_back(t);
  CHECK(f.target() == want);
  seqs.clear();
  f.Prepare(100, &seqs);
  RunPass(*cache, f);
  // A fork shares the blocks and copies the target; each then goes its own way.
  SequenceFeed g = f.Fork(*cache);
  CHECK(g.table().blocks == f.table().blocks);
  CHECK(g.target() == f.target());
  CHECK(cache->num_free_blocks() == cache->num_total_blocks() - 2);
  g.Append(9);
  CHECK(g.left() == 1);
  CHECK(f.left() == 0);
  f.Free(*cache);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks() - 2);  // g still holds them
  BlockTable taken = g.TakeTable();
  CHECK(g.table().empty());
  CHECK(g.computed() == 0);
  cache->Free(taken);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

}  // namespace sequence_feed_test
}  // namespace textgen
