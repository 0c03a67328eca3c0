#include "engine/kv_cache/kv_cache_options.h"

#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <limits>

namespace textgen {
namespace {

TEST_CASE("KvCacheOptions: sizes of a Llama-7B-like block", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 32, .n_kv_heads = 32, .head_dim = 128, .num_blocks = 4};
  REQUIRE(o.block_size == 16);
  REQUIRE(o.Validate().ok());
  CHECK(o.FloatsPerBlock() == size_t{32} * 2 * 32 * 16 * 128);
  CHECK(o.BlockStrideBytes() == size_t{16} << 20);  // 16 MiB, already 64-byte aligned
  absl::StatusOr<int> n = o.NumBlocksForByteBudget(size_t{1} << 30);
  REQUIRE(n.ok());
  CHECK(*n == 64);
  // Partial blocks do not count.
  CHECK(*o.NumBlocksForByteBudget((size_t{1} << 30) + (size_t{16} << 20) - 1) == 64);
}

TEST_CASE("KvCacheOptions: block stride is padded to 64 bytes", "[kv_cache]") {
  // 1 layer x 2 x 1 head x 3 tokens x 1 dim = 6 floats = 24 bytes -> 64.
  KvCacheOptions o{.n_layers = 1, .n_kv_heads = 1, .head_dim = 1, .block_size = 3, .num_blocks = 1};
  CHECK(o.FloatsPerBlock() == 6);
  CHECK(o.BlockStrideBytes() == 64);
  CHECK(*o.NumBlocksForByteBudget(640) == 10);
  CHECK(*o.NumBlocksForByteBudget(639) == 9);
}

TEST_CASE("KvCacheOptions: budget smaller than one block is ResourceExhausted", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 2, .n_kv_heads = 2, .head_dim = 64};
  absl::StatusOr<int> n = o.NumBlocksForByteBudget(o.BlockStrideBytes() - 1);
  REQUIRE(absl::IsResourceExhausted(n.status()));
  CHECK_THAT(std::string(n.status().message()), Catch::Contains("smaller than one block"));
  CHECK(*o.NumBlocksForByteBudget(o.BlockStrideBytes()) == 1);
}

TEST_CASE("KvCacheOptions: huge budgets clamp to INT_MAX blocks", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 1, .n_kv_heads = 1, .head_dim = 1, .block_size = 16};
  CHECK(*o.NumBlocksForByteBudget(std::numeric_limits<size_t>::max()) == INT_MAX);
}

TEST_CASE("KvCacheOptions: invalid shapes are rejected", "[kv_cache]") {
  KvCacheOptions good{
      .n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .num_blocks = 8};
  REQUIRE(good.Validate().ok());
  for (int field = 0; field < 5; ++field) {
    for (int bad : {0, -1}) {
      KvCacheOptions o = good;
      int* fields[] = {&o.n_layers, &o.n_kv_heads, &o.head_dim, &o.block_size, &o.num_blocks};
      *fields[field] = bad;
      INFO("field " << field << " = " << bad);
      CHECK(absl::IsInvalidArgument(o.Validate()));
      if (field < 4) CHECK(absl::IsInvalidArgument(o.NumBlocksForByteBudget(1 << 20).status()));
    }
  }
}

TEST_CASE("KvCacheOptions: sizes that overflow size_t are rejected", "[kv_cache]") {
  KvCacheOptions o{.n_layers = INT_MAX,
                   .n_kv_heads = INT_MAX,
                   .head_dim = INT_MAX,
                   .block_size = INT_MAX,
                   .num_blocks = 1};
  CHECK(absl::IsInvalidArgument(o.Validate()));
  KvCacheOptions many{.n_layers = 1024,
                      .n_kv_heads = 1024,
                      .head_dim = 1024,
                      .block_size = 1024,
                      .num_blocks = INT_MAX};
  CHECK(absl::IsInvalidArgument(many.Validate()));
}

}  // namespace
}  // namespace textgen
