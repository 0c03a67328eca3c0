#include "engine/kv_cache/block_table.h"

#include <catch2/catch.hpp>
#include <type_traits>
#include <utility>

namespace textgen {
namespace block_table_test {

static_assert(!std::is_copy_constructible_v<BlockTable>, "a copy would duplicate references");
static_assert(std::is_nothrow_move_constructible_v<BlockTable>);

TEST_CASE("BlockTable: slot -> block and offset", "[kv_cache]") {
  BlockTable t;
  t.blocks = {7, 3, 9};
  t.num_tokens = 10;
  CHECK(t.num_blocks() == 3);
  CHECK(t.BlockOf(0, 4) == 7);
  CHECK(t.BlockOf(3, 4) == 7);
  CHECK(t.BlockOf(4, 4) == 3);
  CHECK(t.BlockOf(9, 4) == 9);
  CHECK(BlockTable::OffsetOf(9, 4) == 1);
  CHECK(BlockTable::OffsetOf(4, 4) == 0);
}

TEST_CASE("BlockTable: moved-from table is empty", "[kv_cache]") {
  BlockTable a;
  a.blocks = {1, 2};
  a.num_tokens = 5;
  BlockTable b(std::move(a));
  CHECK(a.empty());
  CHECK(a.num_tokens == 0);
  CHECK(b.blocks == std::vector<int32_t>{1, 2});
  CHECK(b.num_tokens == 5);
  BlockTable c;
  c = std::move(b);
  CHECK(b.empty());
  CHECK(b.num_tokens == 0);
  CHECK(c.num_tokens == 5);
}

}  // namespace block_table_test
}  // namespace textgen
