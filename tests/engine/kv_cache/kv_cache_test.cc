#include "engine/kv_cache/kv_cache.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace textgen {
namespace kv_cache_test {

constexpr int kLayers = 2;
constexpr int kHeads = 2;
constexpr int kDim = 3;
constexpr int kBs = 4;

std::unique_ptr<KvCache> MakeCache(int num_blocks) {
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create({.n_layers = kLayers,
                                                                    .n_kv_heads = kHeads,
                                                                    .head_dim = kDim,
                                                                    .block_size = kBs,
                                                                    .num_blocks = num_blocks});
  REQUIRE(cache.ok());
  return std::move(cache).value();
}

// A value unique to (tag, layer, K/V, head, dim), exact in float for tag < 2^18.
float Pattern(int tag, int layer, int kv, int head, int d) {
  return static_cast<float>(tag * 64 + ((layer * 2 + kv) * kHeads + head) * kDim + d);
}

void WriteToken(KvCache& cache, const BlockTable& t, int slot, int tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kHeads; ++h) {
      for (int d = 0; d < kDim; ++d) {
        cache.KeySlot(t, l, h, slot)[d] = Pattern(tag, l, 0, h, d);
        cache.ValueSlot(t, l, h, slot)[d] = Pattern(tag, l, 1, h, d);
      }
    }
  }
}

bool TokenIs(const KvCache& cache, const BlockTable& t, int slot, int tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kHeads; ++h) {
      for (int d = 0; d < kDim; ++d) {
        if (cache.KeySlot(t, l, h, slot)[d] != Pattern(tag, l, 0, h, d)) return false;
        if (cache.ValueSlot(t, l, h, slot)[d] != Pattern(tag, l, 1, h, d)) return false;
      }
    }
  }
  return true;
}

// Appends n tokens and writes tag first_tag + i into each new slot.
void AppendTokens(KvCache& cache, BlockTable& t, int n, int first_tag) {
  const int start = t.num_tokens;
  REQUIRE(cache.Append(t, n).ok());
  for (int i = 0; i < n; ++i) WriteToken(cache, t, start + i, first_tag + i);
}

TEST_CASE("KvCache: Create validates options", "[kv_cache]") {
  CHECK(absl::IsInvalidArgument(
      KvCache::Create({.n_layers = 1, .n_kv_heads = 1, .head_dim = 1, .num_blocks = 0}).status()));
  auto cache = MakeCache(8);
  CHECK(cache->num_total_blocks() == 8);
  CHECK(cache->num_free_blocks() == 8);
  CHECK(cache->block_size() == kBs);
  CHECK(cache->options().head_dim == kDim);
}

TEST_CASE("KvCache: Append allocates blocks as tokens cross block boundaries", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable t;
  CHECK(cache->BlocksNeeded(t, 0) == 0);
  CHECK(cache->BlocksNeeded(t, 1) == 1);
  CHECK(cache->BlocksNeeded(t, 4) == 1);
  CHECK(cache->BlocksNeeded(t, 5) == 2);
  REQUIRE(cache->Append(t, 0).ok());
  CHECK(t.empty());
  REQUIRE(cache->Append(t, 3).ok());
  CHECK(t.num_tokens == 3);
  CHECK(t.num_blocks() == 1);
  CHECK(cache->BlocksNeeded(t, 1) == 0);  // fits in the partial block
  REQUIRE(cache->Append(t, 1).ok());
  CHECK(t.num_blocks() == 1);
  REQUIRE(cache->Append(t, 1).ok());  // crosses into a second block
  CHECK(t.num_blocks() == 2);
  REQUIRE(cache->Append(t, 10).ok());  // 15 tokens -> 4 blocks
  CHECK(t.num_tokens == 15);
  CHECK(t.num_blocks() == 4);
  CHECK(cache->num_free_blocks() == 4);
  for (int32_t b : t.blocks) CHECK(cache->pool().RefCount(b) == 1);
  CHECK(absl::IsInvalidArgument(cache->Append(t, -1)));
  CHECK(t.num_tokens == 15);
  cache->Free(t);
}

TEST_CASE("KvCache: slots map to block tiles", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable t;
  REQUIRE(cache->Append(t, 9).ok());
  for (int slot = 0; slot < 9; ++slot) {
    const int32_t b = t.blocks[slot / kBs];
    for (int l = 0; l < kLayers; ++l) {
      for (int h = 0; h < kHeads; ++h) {
        CHECK(cache->KeySlot(t, l, h, slot) == cache->pool().Key(b, l, h) + (slot % kBs) * kDim);
        CHECK(cache->ValueSlot(t, l, h, slot) ==
              cache->pool().Value(b, l, h) + (slot % kBs) * kDim);
      }
    }
  }
  for (int s = 0; s < 9; ++s) WriteToken(*cache, t, s, 100 + s);
  for (int s = 0; s < 9; ++s) CHECK(TokenIs(*cache, t, s, 100 + s));
  cache->Free(t);
}

TEST_CASE("KvCache: Fork shares blocks without copying", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 6, 0);
  const int free_before = cache->num_free_blocks();
  BlockTable child = cache->Fork(parent);
  CHECK(child.blocks == parent.blocks);
  CHECK(child.num_tokens == 6);
  CHECK(cache->num_free_blocks() == free_before);
  for (int32_t b : parent.blocks) CHECK(cache->pool().RefCount(b) == 2);
  for (int s = 0; s < 6; ++s) CHECK(TokenIs(*cache, child, s, s));
  BlockTable empty;
  BlockTable empty_child = cache->Fork(empty);
  CHECK(empty_child.empty());
  cache->Free(parent);
  for (int32_t b : child.blocks) CHECK(cache->pool().RefCount(b) == 1);
  CHECK(cache->num_free_blocks() == free_before);  // child still holds everything
  cache->Free(child);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache: copy-on-write of a shared partial last block", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 6, 0);  // block 0 full, block 1 holds slots 4, 5
  BlockTable child = cache->Fork(parent);
  const int32_t shared_last = parent.blocks[1];

  CHECK(cache->BlocksNeeded(child, 1) == 1);  // the copy
  CHECK(cache->BlocksNeeded(child, 3) == 2);  // the copy + one more block
  const int free_before = cache->num_free_blocks();
  REQUIRE(cache->Append(child, 1).ok());
  CHECK(cache->num_free_blocks() == free_before - 1);
  CHECK(child.blocks[0] == parent.blocks[0]);  // full block stays shared
  CHECK(child.blocks[1] != shared_last);       // partial block was copied
  CHECK(parent.blocks[1] == shared_last);
  CHECK(cache->pool().RefCount(parent.blocks[0]) == 2);
  CHECK(cache->pool().RefCount(shared_last) == 1);
  CHECK(cache->pool().RefCount(child.blocks[1]) == 1);

  WriteToken(*cache, child, 6, 1000);
  // The child sees the copied earlier slots and its own new one.
  for (int s = 0; s < 6; ++s) CHECK(TokenIs(*cache, child, s, s));
  CHECK(TokenIs(*cache, child, 6, 1000));
  // The parent's block is intact, and the parent now appends in place (no longer shared).
  for (int s = 0; s < 6; ++s) CHECK(TokenIs(*cache, parent, s, s));
  CHECK(cache->BlocksNeeded(parent, 1) == 0);
  AppendTokens(*cache, parent, 1, 2000);
  CHECK(parent.blocks[1] == shared_last);
  CHECK(TokenIs(*cache, parent, 6, 2000));
  CHECK(TokenIs(*cache, child, 6, 1000));
  cache->Free(parent);
  cache->Free(child);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache: the parent copies too if it appends first", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 2, 0);
  BlockTable child = cache->Fork(parent);
  AppendTokens(*cache, parent, 1, 500);
  CHECK(parent.blocks[0] != child.blocks[0]);
  CHECK(child.num_tokens == 2);
  CHECK(TokenIs(*cache, child, 0, 0));
  CHECK(TokenIs(*cache, child, 1, 1));
  CHECK(TokenIs(*cache, parent, 1, 1));
  CHECK(TokenIs(*cache, parent, 2, 500));
  // The child is now the sole owner of the original block: no copy needed.
  CHECK(cache->BlocksNeeded(child, 1) == 0);
  cache->Free(parent);
  cache->Free(child);
}

TEST_CASE("KvCache: a shared full last block is not copied", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 4, 0);
  BlockTable child = cache->Fork(parent);
  CHECK(cache->BlocksNeeded(child, 1) == 1);  // just the new block
  AppendTokens(*cache, child, 1, 100);
  CHECK(child.blocks[0] == parent.blocks[0]);
  CHECK(cache->pool().RefCount(parent.blocks[0]) == 2);
  for (int s = 0; s < 4; ++s) CHECK(TokenIs(*cache, parent, s, s));
  cache->Free(parent);
  cache->Free(child);
}

TEST_CASE("KvCache: exhaustion is all-or-nothing with a clear message", "[kv_cache]") {
  auto cache = MakeCache(4);
  BlockTable a;
  AppendTokens(*cache, a, 10, 0);  // 3 blocks, last one partial
  BlockTable b = cache->Fork(a);
  REQUIRE(cache->num_free_blocks() == 1);
  // b needs a copy of the shared partial block plus one more block: 2 > 1 free.
  CHECK(cache->BlocksNeeded(b, 3) == 2);
  CHECK_FALSE(cache->CanAppend(b, 3));
  const std::vector<int32_t> blocks_before = b.blocks;
  std::vector<int> refs_before;
  for (int32_t i = 0; i < 4; ++i) refs_before.push_back(cache->pool().RefCount(i));
  const std::vector<int32_t> free_before(cache->pool().free_blocks().begin(),
                                         cache->pool().free_blocks().end());

  absl::Status s = cache->Append(b, 3);
  REQUIRE(absl::IsResourceExhausted(s));
  CHECK(s.message() ==
        "KV cache pool exhausted: appending 3 tokens to a 10-token sequence needs 2 blocks of 4 "
        "tokens (1 for copy-on-write) but only 1 of 4 are free");
  CHECK(b.blocks == blocks_before);
  CHECK(b.num_tokens == 10);
  for (int32_t i = 0; i < 4; ++i) CHECK(cache->pool().RefCount(i) == refs_before[i]);
  CHECK(std::vector<int32_t>(cache->pool().free_blocks().begin(),
                             cache->pool().free_blocks().end()) == free_before);
  for (int s2 = 0; s2 < 10; ++s2) CHECK(TokenIs(*cache, a, s2, s2));

  // What does fit still works: 2 tokens only need the copy.
  CHECK(cache->CanAppend(b, 2));
  AppendTokens(*cache, b, 2, 100);
  CHECK(cache->num_free_blocks() == 0);
  for (int s2 = 0; s2 < 10; ++s2) CHECK(TokenIs(*cache, a, s2, s2));
  CHECK(absl::IsResourceExhausted(cache->Append(a, 3)));
  cache->Free(a);
  cache->Free(b);
  CHECK(cache->num_free_blocks() == 4);
}

TEST_CASE("KvCache: Free is idempotent", "[kv_cache]") {
  auto cache = MakeCache(4);
  BlockTable t;
  cache->Free(t);
  AppendTokens(*cache, t, 5, 0);
  cache->Free(t);
  CHECK(t.empty());
  CHECK(t.num_tokens == 0);
  cache->Free(t);
  CHECK(cache->num_free_blocks() == 4);
}

TEST_CASE("KvCache: Truncate releases trailing blocks and keeps data", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable t;
  AppendTokens(*cache, t, 13, 0);  // 4 blocks
  REQUIRE(cache->num_free_blocks() == 4);
  cache->Truncate(t, 13);  // no-op
  CHECK(t.num_blocks() == 4);
  cache->Truncate(t, 9);  // mid-block: 3 blocks
  CHECK(t.num_tokens == 9);
  CHECK(t.num_blocks() == 3);
  CHECK(cache->num_free_blocks() == 5);
  cache->Truncate(t, 8);  // on a boundary: 2 blocks
  CHECK(t.num_blocks() == 2);
  CHECK(cache->num_free_blocks() == 6);
  for (int s = 0; s < 8; ++s) CHECK(TokenIs(*cache, t, s, s));
  // Appending after a rollback overwrites the rolled-back slots.
  AppendTokens(*cache, t, 2, 300);
  CHECK(TokenIs(*cache, t, 8, 300));
  cache->Truncate(t, 0);
  CHECK(t.empty());
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache: Truncate of a fork into a shared block copies on the next Append",
          "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 8, 0);
  BlockTable child = cache->Fork(parent);
  cache->Truncate(child, 5);  // the child's last block (parent's block 1) is shared, partial
  CHECK(cache->pool().RefCount(parent.blocks[1]) == 2);
  CHECK(cache->BlocksNeeded(child, 1) == 1);
  AppendTokens(*cache, child, 1, 900);  // overwrites slot 5 in a private copy
  CHECK(TokenIs(*cache, child, 5, 900));
  CHECK(TokenIs(*cache, child, 4, 4));
  for (int s = 0; s < 8; ++s) CHECK(TokenIs(*cache, parent, s, s));
  cache->Free(parent);
  cache->Free(child);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache: DropFront removes whole blocks after the kept prefix", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable t;
  AppendTokens(*cache, t, 18, 0);  // 5 blocks: slots 0-3 | 4-7 | 8-11 | 12-15 | 16-17
  const std::vector<int32_t> blocks = t.blocks;
  cache->DropFront(t, 0, 1);  // no-op
  CHECK(t.num_tokens == 18);
  cache->DropFront(t, 2, 1);  // drop 4-11
  CHECK(t.blocks == std::vector<int32_t>{blocks[0], blocks[3], blocks[4]});
  CHECK(t.num_tokens == 10);
  CHECK(cache->num_free_blocks() == 5);
  CHECK(cache->pool().RefCount(blocks[1]) == 0);
  // Slots shift down by 2 * block_size.
  for (int s = 0; s < 4; ++s) CHECK(TokenIs(*cache, t, s, s));
  for (int s = 4; s < 10; ++s) CHECK(TokenIs(*cache, t, s, s + 8));
  // Appending continues in the (still partial) last block.
  CHECK(cache->BlocksNeeded(t, 2) == 0);
  AppendTokens(*cache, t, 2, 500);
  CHECK(TokenIs(*cache, t, 11, 501));
  // Dropping the partial tail too leaves exactly the kept blocks.
  cache->DropFront(t, 2, 1);
  CHECK(t.num_tokens == 4);
  CHECK(t.blocks == std::vector<int32_t>{blocks[0]});
  CHECK(cache->num_free_blocks() == 7);
  cache->DropFront(t, 1, 0);
  CHECK(t.empty());
  CHECK(t.num_tokens == 0);
  CHECK(cache->num_free_blocks() == 8);
}

TEST_CASE("KvCache: DropFront of shared blocks only drops this table's reference", "[kv_cache]") {
  auto cache = MakeCache(8);
  BlockTable parent;
  AppendTokens(*cache, parent, 12, 0);
  BlockTable child = cache->Fork(parent);
  cache->DropFront(child, 1, 0);
  CHECK(child.num_tokens == 8);
  CHECK(cache->pool().RefCount(parent.blocks[0]) == 1);
  CHECK(cache->num_free_blocks() == 5);
  for (int s = 0; s < 8; ++s) CHECK(TokenIs(*cache, child, s, s + 4));
  for (int s = 0; s < 12; ++s) CHECK(TokenIs(*cache, parent, s, s));
  cache->Free(parent);
  cache->Free(child);
  CHECK(cache->num_free_blocks() == 8);
}

// A BF16 bit pattern unique to (tag, layer, K/V, head, slot-in-block, dim); never 0.
uint16_t Bf16Pattern(int tag, int layer, int kv, int head, int i) {
  return static_cast<uint16_t>(0x3f80 + tag * 97 +
                               (((layer * 2 + kv) * kHeads + head) * kBs * kDim + i));
}

void FillBf16Block(BlockPool& pool, int32_t block, int tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kHeads; ++h) {
      for (int i = 0; i < kBs * kDim; ++i) {
        pool.KeyBf16(block, l, h)[i] = Bf16Pattern(tag, l, 0, h, i);
        pool.ValueBf16(block, l, h)[i] = Bf16Pattern(tag, l, 1, h, i);
      }
    }
  }
}

bool Bf16BlockIs(const BlockPool& pool, int32_t block, int tag) {
  for (int l = 0; l < kLayers; ++l) {
    for (int h = 0; h < kHeads; ++h) {
      for (int i = 0; i < kBs * kDim; ++i) {
        if (pool.KeyBf16(block, l, h)[i] != Bf16Pattern(tag, l, 0, h, i)) return false;
        if (pool.ValueBf16(block, l, h)[i] != Bf16Pattern(tag, l, 1, h, i)) return false;
      }
    }
  }
  return true;
}

TEST_CASE("KvCache: copy-on-write of a BF16 cache copies its 2-byte tiles", "[kv_cache]") {
  auto cache = KvCache::Create({.n_layers = kLayers,
                                .n_kv_heads = kHeads,
                                .head_dim = kDim,
                                .block_size = kBs,
                                .num_blocks = 8,
                                .type = KvType::kBf16});
  REQUIRE(cache.ok());
  KvCache& kc = **cache;
  BlockPool& pool = kc.pool();
  // 2 x 2 x 2 x 4 x 3 = 96 elements = 192 bytes: adjacent blocks with no padding between
  // them, so a copy of 4-byte elements would run into the next block.
  REQUIRE(pool.block_bytes() == 192);
  // Fill every block first, so an over-long copy is seen in the block after the destination.
  std::vector<int32_t> all;
  for (int i = 0; i < 8; ++i) all.push_back(*pool.Allocate());
  for (int32_t b : all) FillBf16Block(pool, b, 100 + b);
  for (int32_t b : all) REQUIRE(pool.DecRef(b).ok());

  BlockTable parent;
  REQUIRE(kc.Append(parent, 6).ok());  // block 0 full, block 1 holds slots 4, 5
  FillBf16Block(pool, parent.blocks[0], 1);
  FillBf16Block(pool, parent.blocks[1], 2);
  BlockTable child = kc.Fork(parent);
  REQUIRE(kc.Append(child, 1).ok());
  REQUIRE(child.blocks[1] != parent.blocks[1]);
  const int32_t copy = child.blocks[1];
  CHECK(Bf16BlockIs(pool, copy, 2));              // every layer's K and V, whole tiles
  CHECK(Bf16BlockIs(pool, parent.blocks[1], 2));  // the source is intact
  CHECK(Bf16BlockIs(pool, parent.blocks[0], 1));
  // Every block not involved still holds its own pattern (nothing written past the copy).
  for (int32_t b : all) {
    if (b != copy && b != parent.blocks[0] && b != parent.blocks[1]) {
      CHECK(Bf16BlockIs(pool, b, 100 + b));
    }
  }
  kc.Free(parent);
  kc.Free(child);
  CHECK(kc.num_free_blocks() == 8);
}

}  // namespace kv_cache_test
}  // namespace textgen
