#include "engine/ops/threading.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace textgen::ops {
namespace threading_test {

TEST_CASE(
    "ParallelFor covers every index once in aligned ranges, at most kRangesPerThread per thread") {
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
    for (int64_t align : {1, 16}) {
      for (int threads : {1, 2, 3, 8}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        ParallelFor(n, align, threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
          std::lock_guard<std::mutex> lock(mu);
          ranges.emplace_back(b, e);
        });
        INFO("n " << n << " align " << align << " threads " << threads);
        for (int64_t i = 0; i < n; ++i) CHECK(hits[i] == 1);
        CHECK(static_cast<int>(ranges.size()) <= kRangesPerThread * threads);
        for (auto [b, e] : ranges) {
          CHECK(b % align == 0);
          CHECK(b < e);
        }
      }
    }
  }
}

TEST_CASE("ParallelFor's ranges depend only on n, align and threads") {
  auto ranges_of = [](int64_t n, int64_t align, int threads) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ParallelFor(n, align, threads, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      ranges.emplace_back(b, e);
    });
    std::sort(ranges.begin(), ranges.end());
    return ranges;
  };
  for (int rep = 0; rep < 50; ++rep) {
    CHECK(ranges_of(768, 16, 2) == ranges_of(768, 16, 2));
    CHECK(ranges_of(1000, 1, 3) == ranges_of(1000, 1, 3));
  }
  CHECK(ranges_of(768, 16, 2).size() == 16);
}

TEST_CASE("ParallelFor with one range runs on the calling thread") {
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id ran;
  ParallelFor(10, 16, 4, [&](int64_t, int64_t) { ran = std::this_thread::get_id(); });
  CHECK(ran == me);
}

TEST_CASE("ParallelForEach runs every index once") {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> hits(257);
    ParallelForEach(257, threads, [&](int64_t i) { hits[i]++; });
    for (auto& h : hits) CHECK(h == 1);
  }
  int calls = 0;
  ParallelForEach(0, 2, [&](int64_t) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("the default thread count is the process's CPU budget") {
  CHECK(DefaultNumThreads() >= 1);
  CHECK(DefaultNumThreads() <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  CHECK(DescribeThreadDefault().find(std::to_string(DefaultNumThreads()) + " compute threads") ==
        0);
}

}  // namespace threading_test
}  // namespace textgen::ops
