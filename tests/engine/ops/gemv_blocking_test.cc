#include "engine/ops/gemv_blocking.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <tuple>
#include <vector>

namespace textgen::ops {
namespace gemv_blocking_test {

struct Call {
  int64_t i0, i1, r0, r1;
};

// Every call of one run, and how many times each (activation row, weight row) pair was covered.
struct Record {
  std::mutex mu;
  std::vector<Call> calls;
  std::vector<int> covered;
};

void Add(Record& rec, int64_t out, int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
  std::lock_guard<std::mutex> lock(rec.mu);
  rec.calls.push_back({i0, i1, r0, r1});
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t r = r0; r < r1; ++r) ++rec.covered[i * out + r];
  }
}

TEST_CASE("RunGemvBlocks covers every (row, column) once, in L2-sized pieces") {
  const auto [n, out] = GENERATE(
      std::make_tuple(int64_t{1}, int64_t{5}), std::make_tuple(int64_t{4}, int64_t{3000}),
      std::make_tuple(int64_t{128}, int64_t{3072}), std::make_tuple(int64_t{37}, int64_t{1000}));
  const int threads = GENERATE(1, 2);
  // 3 KiB activation rows (256 KiB chunks: 84 rows), 1 KiB weight rows (blocks of 256 rows).
  constexpr int64_t kXRow = 3072, kWRow = 1024;
  Record rec;
  rec.covered.assign(static_cast<size_t>(n * out), 0);
  RunGemvBlocks(n, out, kXRow, kWRow, threads, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    Add(rec, out, i0, i1, r0, r1);
  });
  for (int c : rec.covered) REQUIRE(c == 1);
  for (const Call& call : rec.calls) {
    CHECK(call.r0 % 16 == 0);  // whole register tiles of up to 16 weight rows
    if (n <= 4) {
      CHECK(call.i0 == 0);  // decode: all rows in one call
      CHECK(call.i1 == n);
    } else {
      CHECK(call.i0 % 84 == 0);
      CHECK(call.i1 - call.i0 <= 84);
      CHECK(call.r1 - call.r0 <= 256);
    }
  }
}

}  // namespace gemv_blocking_test
}  // namespace textgen::ops
