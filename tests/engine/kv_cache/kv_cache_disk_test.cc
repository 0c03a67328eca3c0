// The KV disk tier under the prefix cache (KvCache::SetDiskStore): blocks the pool evicts go to
// disk and come back byte for byte when a prompt's chain misses in memory; a rejected file ends
// the match there; a shutdown's spill is found by the next process.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/kv_cache/kv_disk_store.h"
#include "tests/test_util.h"

namespace textgen {
namespace kv_cache_disk_test {

namespace fs = std::filesystem;

constexpr int kBs = 4;

KvCacheOptions Shape(int num_blocks) {
  return {
      .n_layers = 2, .n_kv_heads = 2, .head_dim = 3, .block_size = kBs, .num_blocks = num_blocks};
}

std::unique_ptr<KvCache> MakeCache(int num_blocks) {
  auto cache = KvCache::Create(Shape(num_blocks));
  REQUIRE(cache.ok());
  (*cache)->EnablePrefixCache(42);
  return std::move(cache).value();
}

std::unique_ptr<KvDiskStore> OpenStore(const std::string& dir, uint64_t model_id = 1) {
  KvDiskOptions o;
  o.dir = dir;
  o.max_bytes = 1 << 20;
  o.model_id = model_id;
  o.shape = Shape(1);
  auto s = KvDiskStore::Open(o);
  REQUIRE(s.ok());
  return std::move(s).value();
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::ScratchDir() + "/kv_cache_disk_test/" + name;
  fs::remove_all(dir);
  return dir;
}

// Fills every byte of `block` from (seed, byte index): what a forward pass would have written.
void Fill(KvCache& c, int32_t block, int seed) {
  std::byte* p = c.pool().BlockData(block);
  for (size_t i = 0; i < c.pool().payload_bytes(); ++i) {
    p[i] = static_cast<std::byte>((i * 131 + seed * 17 + 3) & 0xff);
  }
}
bool Holds(const KvCache& c, int32_t block, int seed) {
  const std::byte* p = c.pool().BlockData(block);
  for (size_t i = 0; i < c.pool().payload_bytes(); ++i) {
    if (p[i] != static_cast<std::byte>((i * 131 + seed * 17 + 3) & 0xff)) return false;
  }
  return true;
}

std::vector<int32_t> Tokens(int n, int tag) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(tag * 1000 + i);
  return t;
}

// A "request" over `tokens`: blocks appended and filled (block j with seed tag * 100 + j),
// published, freed (its blocks stay cached, idle).
void Compute(KvCache& c, const std::vector<int32_t>& tokens, int tag) {
  BlockTable t;
  REQUIRE(c.Append(t, static_cast<int>(tokens.size())).ok());
  for (int j = 0; j < t.num_blocks(); ++j) Fill(c, t.blocks[j], tag * 100 + j);
  c.PublishPrefix(t, tokens, t.num_blocks());
  c.Free(t);
}

// Takes every block of the pool (evicting all idle ones), then gives them back.
void Flood(KvCache& c) {
  BlockTable t;
  REQUIRE(c.Append(t, c.num_total_blocks() * kBs).ok());
  c.Free(t);
}

TEST_CASE("disk tier: evicted blocks come back from disk byte for byte", "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("evict");
  auto store = OpenStore(dir);
  auto c = MakeCache(8);
  c->SetDiskStore(store.get());
  const std::vector<int32_t> a = Tokens(5 * kBs + 2, 1);  // 5 whole blocks and 2 tokens
  Compute(*c, a, 1);
  Flood(*c);  // all five evicted: spilled
  store->Flush();
  CHECK(store->stats().blocks_written == 5);
  CHECK(c->PeekPrefix(a, 8).blocks == 0);

  BlockTable t = c->MatchPrefix(a, /*max_blocks=*/8);
  REQUIRE(t.num_blocks() == 5);
  CHECK(t.num_tokens == 5 * kBs);
  for (int j = 0; j < 5; ++j) CHECK(Holds(*c, t.blocks[j], 100 + j));
  CHECK(store->stats().blocks_read == 5);
  // Published again: the next match is in memory (no more reads).
  CHECK(c->PeekPrefix(a, 8).blocks == 5);
  BlockTable again = c->MatchPrefix(a, 8);
  CHECK(again.blocks == t.blocks);
  CHECK(store->stats().blocks_read == 5);
  c->Free(again);
  c->Free(t);

  // max_blocks bounds the reads; a prompt sharing only the first two blocks reads two.
  Flood(*c);
  store->Flush();
  std::vector<int32_t> b = a;
  b[2 * kBs + 1] = 7;
  BlockTable two = c->MatchPrefix(b, 8);
  CHECK(two.num_blocks() == 2);
  CHECK(Holds(*c, two.blocks[1], 101));
  c->Free(two);
  CHECK(store->stats().blocks_rejected == 0);
}

TEST_CASE("disk tier: a rejected file ends the match there, the rest is recomputed",
          "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("reject");
  auto store = OpenStore(dir);
  auto c = MakeCache(8);
  c->SetDiskStore(store.get());
  const std::vector<int32_t> a = Tokens(4 * kBs + 1, 2);
  Compute(*c, a, 2);
  Flood(*c);
  store->Flush();
  // Damage the third block's file.
  uint64_t key = store->RootKey();
  for (int j = 0; j < 3; ++j) {
    key = KvDiskStore::ChainKey(key, absl::MakeConstSpan(a).subspan(j * kBs, kBs));
  }
  const std::string path = absl::StrFormat("%s/%016x.kvb", dir, key);
  std::string bytes = testing::ReadFile(path);
  bytes[bytes.size() - 1] ^= 1;
  testing::WriteFile(path, bytes);

  const int free_before = c->num_free_blocks();
  BlockTable t = c->MatchPrefix(a, 8);
  CHECK(t.num_blocks() == 2);
  CHECK(Holds(*c, t.blocks[0], 200));
  CHECK(Holds(*c, t.blocks[1], 201));
  CHECK(store->stats().blocks_rejected == 1);
  CHECK_FALSE(fs::exists(path));
  // The block the bad file was read into went back to the pool.
  CHECK(c->num_free_blocks() == free_before - 2);
  c->Free(t);
}

TEST_CASE("disk tier: cached blocks spilled at shutdown serve the next process",
          "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("restart");
  const std::vector<int32_t> a = Tokens(3 * kBs + 3, 3);
  {
    auto store = OpenStore(dir);
    auto c = MakeCache(8);
    c->SetDiskStore(store.get());
    Compute(*c, a, 3);
    CHECK(c->SpillIdleToDisk() == 3);
    CHECK(c->SpillIdleToDisk() == 0);  // on disk already
    c->SetDiskStore(nullptr);
  }  // the store's destructor writes what is queued
  {
    auto store = OpenStore(dir);
    CHECK(store->stats().files == 3);
    auto c = MakeCache(8);
    c->SetDiskStore(store.get());
    BlockTable t = c->MatchPrefix(a, 8);
    REQUIRE(t.num_blocks() == 3);
    for (int j = 0; j < 3; ++j) CHECK(Holds(*c, t.blocks[j], 300 + j));
    c->Free(t);
  }
  // Another model on the same directory: each file is rejected (deleted), nothing used.
  auto store = OpenStore(dir, /*model_id=*/2);
  auto c = MakeCache(8);
  c->SetDiskStore(store.get());
  BlockTable t = c->MatchPrefix(a, 8);
  CHECK(t.num_blocks() == 0);
  CHECK(store->stats().blocks_rejected == 1);  // the chain ends at its first block
  c->Free(t);
}

TEST_CASE("disk tier: a conversation's partly filled last block comes back too",
          "[kv_cache][kv_disk]") {
  const std::string dir = FreshDir("leaf");
  // A turn ended 3 tokens into its fourth block; the next turn's prompt goes on past it.
  const std::vector<int32_t> turn = Tokens(3 * kBs + 3, 4);
  std::vector<int32_t> next = turn;
  for (int i = 0; i < 2 * kBs; ++i) next.push_back(9000 + i);
  {
    auto store = OpenStore(dir);
    auto c = MakeCache(8);
    c->SetDiskStore(store.get());
    BlockTable t;
    REQUIRE(c->Append(t, static_cast<int>(turn.size())).ok());
    for (int j = 0; j < t.num_blocks(); ++j) Fill(*c, t.blocks[j], 400 + j);
    c->PublishTail(t, turn, t.num_blocks());
    c->Free(t);
    CHECK(c->SpillIdleToDisk() == 4);  // three whole blocks and the leaf
    c->SetDiskStore(nullptr);
  }
  auto store = OpenStore(dir);
  CHECK(store->stats().files == 4);
  auto c = MakeCache(8);
  c->SetDiskStore(store.get());
  BlockTable t = c->MatchPrefix(next, 8);
  REQUIRE(t.num_blocks() == 4);
  CHECK(t.num_tokens == 3 * kBs + 3);
  for (int j = 0; j < 4; ++j) CHECK(Holds(*c, t.blocks[j], 400 + j));
  CHECK(store->stats().blocks_read == 4);
  c->Free(t);
  // A prompt that differs inside the leaf's tokens gets the whole blocks only (a leaf on disk is
  // taken whole or not at all); one that must compute those tokens (copy_above) does not take
  // the leaf either.
  std::vector<int32_t> other = turn;
  other[3 * kBs + 2] = 5;
  BlockTable part = c->MatchPrefix(other, 8);
  CHECK(part.num_tokens == 3 * kBs);
  c->Free(part);
  BlockTable bounded = c->MatchPrefix(next, 8, /*copy_above=*/3 * kBs + 3);
  CHECK(bounded.num_tokens == 3 * kBs);
  c->Free(bounded);
}

TEST_CASE("disk tier: without the prefix cache the store is not used", "[kv_cache][kv_disk]") {
  auto store = OpenStore(FreshDir("off"));
  auto cache = KvCache::Create(Shape(4));
  REQUIRE(cache.ok());
  (*cache)->SetDiskStore(store.get());
  CHECK((*cache)->disk_store() == nullptr);
}

}  // namespace kv_cache_disk_test
}  // namespace textgen
