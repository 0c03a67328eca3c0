#include "engine/kv_cache/block_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace textgen {
namespace block_pool_test {

// 2 layers, 2 KV heads, 4 tokens, 3 dims: 96 floats = 384 bytes per block (already aligned).
KvCacheOptions SmallOptions(int num_blocks = 4) {
  return {.n_layers = 2, .n_kv_heads = 2, .head_dim = 3, .block_size = 4, .num_blocks = num_blocks};
}

std::unique_ptr<BlockPool> MakePool(const KvCacheOptions& o) {
  absl::StatusOr<std::unique_ptr<BlockPool>> pool = BlockPool::Create(o);
  REQUIRE(pool.ok());
  return std::move(pool).value();
}

#ifndef NDEBUG
// Runs `f` in a forked child and reports whether it died of SIGABRT (a failed assert). Catch2
// v2 has no death tests; this is the minimal stand-in.
template <typename F>
bool AbortsInChild(F f) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Catch2's own SIGABRT handler would report the expected abort as a failure; the assert
    // message is noise too.
    std::signal(SIGABRT, SIG_DFL);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    f();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}
#endif

TEST_CASE("BlockPool: rejects invalid options", "[kv_cache]") {
  KvCacheOptions o = SmallOptions();
  o.num_blocks = 0;
  CHECK(absl::IsInvalidArgument(BlockPool::Create(o).status()));
  o = SmallOptions();
  o.head_dim = -1;
  CHECK(absl::IsInvalidArgument(BlockPool::Create(o).status()));
}

TEST_CASE("BlockPool: allocates every block once, then reports exhaustion", "[kv_cache]") {
  auto pool = MakePool(SmallOptions(4));
  CHECK(pool->num_total() == 4);
  CHECK(pool->num_free() == 4);
  CHECK(pool->block_size() == 4);
  CHECK(pool->block_bytes() == 384);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int32_t> b = pool->Allocate();
    REQUIRE(b.ok());
    CHECK(pool->RefCount(*b) == 1);
    got.push_back(*b);
  }
  CHECK(got == std::vector<int32_t>{0, 1, 2, 3});  // fresh pool hands out ids in order
  CHECK(pool->num_free() == 0);
  absl::StatusOr<int32_t> none = pool->Allocate();
  REQUIRE(absl::IsResourceExhausted(none.status()));
  CHECK(none.status().message() == "KV cache pool exhausted: 4 blocks of 4 tokens all in use");
  CHECK(pool->num_free() == 0);
}

TEST_CASE("BlockPool: refcounts free at zero and the free list is LIFO", "[kv_cache]") {
  auto pool = MakePool(SmallOptions(4));
  const int32_t a = *pool->Allocate();
  const int32_t b = *pool->Allocate();
  REQUIRE(pool->IncRef(a).ok());
  REQUIRE(pool->IncRef(a).ok());
  CHECK(pool->RefCount(a) == 3);
  REQUIRE(pool->DecRef(a).ok());
  REQUIRE(pool->DecRef(a).ok());
  CHECK(pool->RefCount(a) == 1);
  CHECK(pool->num_free() == 2);
  REQUIRE(pool->DecRef(a).ok());
  CHECK(pool->RefCount(a) == 0);
  CHECK(pool->num_free() == 3);
  REQUIRE(pool->DecRef(b).ok());
  CHECK(pool->free_blocks().back() == b);
  CHECK(*pool->Allocate() == b);  // most recently freed first
  CHECK(*pool->Allocate() == a);
  CHECK(pool->RefCount(-1) == 0);
  CHECK(pool->RefCount(4) == 0);
}

TEST_CASE("BlockPool: misuse never corrupts the free list", "[kv_cache]") {
  auto pool = MakePool(SmallOptions(4));
  const int32_t a = *pool->Allocate();
  REQUIRE(pool->DecRef(a).ok());
  const std::vector<int32_t> before(pool->free_blocks().begin(), pool->free_blocks().end());
#ifndef NDEBUG
  // Debug builds stop at the bug.
  CHECK(AbortsInChild([&] { (void)pool->DecRef(a); }));
  CHECK(AbortsInChild([&] { (void)pool->IncRef(a); }));
  CHECK(AbortsInChild([&] { (void)pool->DecRef(4); }));
  CHECK(AbortsInChild([&] { (void)pool->DecRef(-1); }));
#else
  // Release builds refuse and change nothing.
  CHECK(absl::IsFailedPrecondition(pool->DecRef(a)));
  CHECK(absl::IsFailedPrecondition(pool->IncRef(a)));
  CHECK(absl::IsOutOfRange(pool->DecRef(4)));
  CHECK(absl::IsOutOfRange(pool->IncRef(-1)));
#endif
  const std::vector<int32_t> after(pool->free_blocks().begin(), pool->free_blocks().end());
  CHECK(before == after);
  CHECK(pool->num_free() == 4);
  CHECK(pool->RefCount(a) == 0);
}

TEST_CASE("BlockPool: block layout is [layer][K,V][head][token][dim]", "[kv_cache]") {
  const KvCacheOptions o = SmallOptions(3);
  auto pool = MakePool(o);
  const size_t tile = size_t{4} * 3;  // block_size * head_dim
  const float* base = pool->Key(0, 0, 0);
  CHECK(reinterpret_cast<uintptr_t>(base) % 64 == 0);
  for (int32_t b = 0; b < 3; ++b) {
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < 2; ++h) {
        const size_t block_off = b * pool->block_bytes() / sizeof(float);
        CHECK(pool->Key(b, l, h) == base + block_off + ((l * 2 + 0) * 2 + h) * tile);
        CHECK(pool->Value(b, l, h) == base + block_off + ((l * 2 + 1) * 2 + h) * tile);
      }
    }
  }
  // The const overloads agree.
  const BlockPool& cpool = *pool;
  CHECK(cpool.Key(2, 1, 1) == pool->Key(2, 1, 1));
  CHECK(cpool.Value(2, 1, 1) == pool->Value(2, 1, 1));
}

TEST_CASE("BlockPool: blocks of odd shapes are still 64-byte aligned", "[kv_cache]") {
  // 1 x 2 x 1 x 3 x 5 = 30 floats = 120 bytes, padded to 128.
  auto pool =
      MakePool({.n_layers = 1, .n_kv_heads = 1, .head_dim = 5, .block_size = 3, .num_blocks = 5});
  CHECK(pool->block_bytes() == 128);
  for (int32_t b = 0; b < 5; ++b) {
    CHECK(reinterpret_cast<uintptr_t>(pool->Key(b, 0, 0)) % 64 == 0);
  }
}

TEST_CASE("BlockPool: CopyBlock copies all layers and nothing else", "[kv_cache]") {
  const KvCacheOptions o = SmallOptions(3);
  auto pool = MakePool(o);
  const size_t tile = size_t{4} * 3;
  auto fill = [&](int32_t b, float base) {
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < 2; ++h) {
        for (size_t i = 0; i < tile; ++i) {
          pool->Key(b, l, h)[i] = base + l * 1000 + h * 100 + i;
          pool->Value(b, l, h)[i] = -(base + l * 1000 + h * 100 + i);
        }
      }
    }
  };
  fill(0, 1);
  fill(1, 50000);
  fill(2, 90000);
  pool->CopyBlock(0, 2);
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      for (size_t i = 0; i < tile; ++i) {
        REQUIRE(pool->Key(2, l, h)[i] == pool->Key(0, l, h)[i]);
        REQUIRE(pool->Value(2, l, h)[i] == pool->Value(0, l, h)[i]);
        REQUIRE(pool->Key(1, l, h)[i] == 50000 + l * 1000 + h * 100 + i);  // untouched
      }
    }
  }
  pool->CopyBlock(1, 1);  // self-copy is a no-op
  CHECK(pool->Key(1, 1, 1)[0] == 51100);
}

TEST_CASE("BlockPool: a BF16 pool has 2-byte tiles in the same layout", "[kv_cache]") {
  KvCacheOptions o = SmallOptions(3);
  o.type = KvType::kBf16;
  auto pool = MakePool(o);
  CHECK(pool->type() == KvType::kBf16);
  CHECK(pool->block_bytes() == 192);  // 96 elements x 2 bytes
  const size_t tile = size_t{4} * 3;
  const uint16_t* base = pool->KeyBf16(0, 0, 0);
  CHECK(reinterpret_cast<uintptr_t>(base) % 64 == 0);
  for (int32_t b = 0; b < 3; ++b) {
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < 2; ++h) {
        const size_t block_off = b * pool->block_bytes() / sizeof(uint16_t);
        CHECK(pool->KeyBf16(b, l, h) == base + block_off + ((l * 2 + 0) * 2 + h) * tile);
        CHECK(pool->ValueBf16(b, l, h) == base + block_off + ((l * 2 + 1) * 2 + h) * tile);
      }
    }
  }
  const BlockPool& cpool = *pool;
  CHECK(cpool.KeyBf16(2, 1, 1) == pool->KeyBf16(2, 1, 1));
  CHECK(cpool.ValueBf16(2, 1, 1) == pool->ValueBf16(2, 1, 1));
}

TEST_CASE("BlockPool: CopyBlock of a BF16 pool copies whole 2-byte blocks only", "[kv_cache]") {
  KvCacheOptions o = SmallOptions(3);
  o.type = KvType::kBf16;
  auto pool = MakePool(o);
  const size_t tile = size_t{4} * 3;
  auto pattern = [](int32_t b, int l, int kv, int h, size_t i) {
    return static_cast<uint16_t>(b * 4096 + ((l * 2 + kv) * 2 + h) * 64 + i + 1);
  };
  for (int32_t b = 0; b < 3; ++b) {
    for (int l = 0; l < 2; ++l) {
      for (int h = 0; h < 2; ++h) {
        for (size_t i = 0; i < tile; ++i) {
          pool->KeyBf16(b, l, h)[i] = pattern(b, l, 0, h, i);
          pool->ValueBf16(b, l, h)[i] = pattern(b, l, 1, h, i);
        }
      }
    }
  }
  // Blocks are 192 bytes apart with no padding: copying 4 bytes per element would overwrite
  // block 2, copying 1 would miss layer 1.
  pool->CopyBlock(0, 1);
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      for (size_t i = 0; i < tile; ++i) {
        REQUIRE(pool->KeyBf16(1, l, h)[i] == pattern(0, l, 0, h, i));
        REQUIRE(pool->ValueBf16(1, l, h)[i] == pattern(0, l, 1, h, i));
        REQUIRE(pool->KeyBf16(0, l, h)[i] == pattern(0, l, 0, h, i));
        REQUIRE(pool->KeyBf16(2, l, h)[i] == pattern(2, l, 0, h, i));
        REQUIRE(pool->ValueBf16(2, l, h)[i] == pattern(2, l, 1, h, i));
      }
    }
  }
}

#ifndef NDEBUG
TEST_CASE("BlockPool: the other type's accessors are caller bugs", "[kv_cache]") {
  KvCacheOptions o = SmallOptions(1);
  o.type = KvType::kBf16;
  auto bf16 = MakePool(o);
  CHECK(AbortsInChild([&] { (void)bf16->Key(0, 0, 0); }));
  auto f32 = MakePool(SmallOptions(1));
  CHECK(AbortsInChild([&] { (void)f32->ValueBf16(0, 0, 0); }));
}
#endif

// Resident set size of this process in bytes, from /proc/self/statm.
size_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST_CASE("BlockPool: a large pool is not touched until blocks are written", "[kv_cache]") {
  // 1 GiB of 16 MiB blocks. Commit would show up as ~1 GiB of RSS.
  KvCacheOptions o{.n_layers = 32, .n_kv_heads = 32, .head_dim = 128, .num_blocks = 64};
  const size_t before = RssBytes();
  auto pool = MakePool(o);
  CHECK(pool->num_free() == 64);
  const size_t after_create = RssBytes();
  CHECK(after_create < before + (size_t{64} << 20));
  const int32_t b = *pool->Allocate();
  pool->Key(b, 31, 31)[0] = 1.5f;
  CHECK(pool->Key(b, 31, 31)[0] == 1.5f);
  CHECK(RssBytes() < before + (size_t{64} << 20));
}

TEST_CASE("BlockPool: reports the bytes of its pages in memory, none until written", "[kv_cache]") {
  // 256 blocks of 256 x 64 floats x 2 (K, V): 32 MiB, one block 128 KiB (whole pages).
  KvCacheOptions o{
      .n_layers = 1, .n_kv_heads = 1, .head_dim = 64, .block_size = 256, .num_blocks = 256};
  auto pool = MakePool(o);
  CHECK(pool->ResidentBytes() == 0);
  const int32_t b = pool->Allocate().value();
  CHECK(pool->ResidentBytes() == 0);  // allocation alone touches nothing
  std::memset(pool->Key(b, 0, 0), 1, pool->block_bytes());
  CHECK(pool->ResidentBytes() >= pool->block_bytes());
  // Huge pages may fault in 2 MiB at once, never the whole pool.
  CHECK(pool->ResidentBytes() <= pool->block_bytes() + (size_t{2} << 20));
}

TEST_CASE("BlockPool: Prefault commits every page, still zeroed", "[kv_cache]") {
  KvCacheOptions o{
      .n_layers = 1, .n_kv_heads = 1, .head_dim = 64, .block_size = 256, .num_blocks = 64};
  auto pool = MakePool(o);
  const size_t mapped = pool->block_bytes() * 64;  // 8 MiB of whole pages
  CHECK(pool->ResidentBytes() == 0);
  REQUIRE(pool->Prefault().ok());
  CHECK(pool->ResidentBytes() == mapped);
  const int32_t b = pool->Allocate().value();
  CHECK(pool->Key(b, 0, 0)[0] == 0.0f);
  CHECK(pool->Value(b, 0, 0)[o.block_size * o.head_dim - 1] == 0.0f);
  pool->Key(b, 0, 0)[0] = 1.5f;
  REQUIRE(pool->Prefault().ok());  // again: written data stays
  CHECK(pool->Key(b, 0, 0)[0] == 1.5f);
}

}  // namespace block_pool_test
}  // namespace textgen
