#include "engine/kv_cache/kv_cache_options.h"

#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <limits>

namespace textgen {
namespace kv_cache_options_test {

TEST_CASE("KvCacheOptions: sizes of a Llama-7B-like block", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 32, .n_kv_heads = 32, .head_dim = 128, .num_blocks = 4};
  REQUIRE(o.block_size == 16);
  REQUIRE(o.Validate().ok());
  CHECK(o.ElementsPerBlock() == size_t{32} * 2 * 32 * 16 * 128);
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
  CHECK(o.ElementsPerBlock() == 6);
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

TEST_CASE("KvCacheOptions: a BF16 block costs half, a budget holds twice the blocks",
          "[kv_cache]") {
  KvCacheOptions f32{.n_layers = 32, .n_kv_heads = 32, .head_dim = 128, .num_blocks = 4};
  KvCacheOptions bf16 = f32;
  bf16.type = KvType::kBf16;
  REQUIRE(f32.type == KvType::kF32);  // the default
  REQUIRE(bf16.Validate().ok());
  CHECK(bf16.ElementsPerBlock() == f32.ElementsPerBlock());
  CHECK(bf16.BlockStrideBytes() == size_t{8} << 20);
  CHECK(*bf16.NumBlocksForByteBudget(size_t{1} << 30) == 128);
  CHECK(*f32.NumBlocksForByteBudget(size_t{1} << 30) == 64);
  CHECK(KvTypeBytes(KvType::kBf16) == 2);
  CHECK(KvTypeBytes(KvType::kF32) == 4);
  CHECK(KvTypeName(KvType::kBf16) == "bf16");
  CHECK(KvTypeName(KvType::kF32) == "f32");
}

TEST_CASE("KvCacheOptions: BF16 strides are padded to 64 bytes too", "[kv_cache]") {
  // 1 x 2 x 1 x 3 x 5 = 30 elements = 60 bytes -> 64; 1 x 2 x 1 x 3 x 11 = 66 -> 132 -> 192.
  KvCacheOptions o{.n_layers = 1,
                   .n_kv_heads = 1,
                   .head_dim = 5,
                   .block_size = 3,
                   .num_blocks = 1,
                   .type = KvType::kBf16};
  CHECK(o.BlockStrideBytes() == 64);
  o.head_dim = 11;
  CHECK(o.BlockStrideBytes() == 192);
  CHECK(*o.NumBlocksForByteBudget(1919) == 9);
}

TEST_CASE("KvCacheOptions: the too-small-budget message names the element type", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 2, .n_kv_heads = 2, .head_dim = 64, .type = KvType::kBf16};
  absl::StatusOr<int> n = o.NumBlocksForByteBudget(o.BlockStrideBytes() - 1);
  REQUIRE(absl::IsResourceExhausted(n.status()));
  CHECK_THAT(std::string(n.status().message()), Catch::Contains("2 bytes (bf16)"));
}

TEST_CASE("KvCacheOptions: an unknown element type is rejected", "[kv_cache]") {
  KvCacheOptions o{.n_layers = 1, .n_kv_heads = 1, .head_dim = 8, .num_blocks = 1};
  o.type = static_cast<KvType>(7);
  CHECK(absl::IsInvalidArgument(o.Validate()));
  CHECK(absl::IsInvalidArgument(o.NumBlocksForByteBudget(1 << 20).status()));
}

}  // namespace kv_cache_options_test
}  // namespace textgen
