#include "engine/ops/worker_pool.h"

#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace textgen::ops {
namespace worker_pool_test {

using std::chrono::milliseconds;

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Runs a 2-part job where part 0 waits (up to 10 s) until part 1 has started: true only if two
// threads ran the parts at once.
bool PartsOverlap(WorkerPool& pool, std::set<std::thread::id>* ids = nullptr) {
  std::atomic<bool> part1_started{false};
  std::atomic<bool> overlapped{false};
  std::mutex mu;
  pool.Run(2, 2, [&](int p) {
    if (ids != nullptr) {
      std::lock_guard<std::mutex> lock(mu);
      ids->insert(std::this_thread::get_id());
    }
    if (p == 1) {
      part1_started = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!part1_started && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    overlapped = part1_started.load();
  });
  return overlapped;
}

TEST_CASE("WorkerPool runs every part exactly once, job after job") {
  WorkerPool pool;
  for (int threads : {1, 2, 3, 5}) {
    for (int parts : {0, 1, 2, 3, 7, 64}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(parts);
        pool.Run(parts, threads, [&](int p) { hits[p]++; });
        for (int p = 0; p < parts; ++p) REQUIRE(hits[p] == 1);
      }
    }
  }
  CHECK(pool.workers() == 4);  // threads - 1, started on first need
  // More parts than the claim word holds: all run, inline.
  std::vector<std::atomic<int>> hits(70'000);
  pool.Run(70'000, 2, [&](int p) { hits[p]++; });
  int wrong = 0;
  for (auto& h : hits) wrong += h != 1;
  CHECK(wrong == 0);
}

TEST_CASE("WorkerPool runs parts on several threads at once") {
  WorkerPool pool;
  std::set<std::thread::id> ids;
  CHECK(PartsOverlap(pool, &ids));
  CHECK(ids.size() == 2);
}

TEST_CASE("WorkerPool: parts a slow worker has not claimed are taken by the caller") {
  WorkerPool pool;
  const std::thread::id caller = std::this_thread::get_id();
  for (int rep = 0; rep < 5; ++rep) {
    std::atomic<int> by_caller{0};
    pool.Run(16, 2, [&](int) {
      if (std::this_thread::get_id() == caller) {
        by_caller++;
      } else {
        std::this_thread::sleep_for(milliseconds(100));  // a descheduled worker
      }
    });
    // The worker holds at most one part while the caller runs the rest.
    CHECK(by_caller >= 15);
  }
}

TEST_CASE("WorkerPool runs a nested job inline on the part's thread") {
  WorkerPool pool;
  std::atomic<int> inner_elsewhere{0};
  std::atomic<int> inner_runs{0};
  pool.Run(4, 2, [&](int) {
    const std::thread::id outer = std::this_thread::get_id();
    pool.Run(8, 2, [&](int) {
      inner_runs++;
      if (std::this_thread::get_id() != outer) inner_elsewhere++;
    });
  });
  CHECK(inner_runs == 32);
  CHECK(inner_elsewhere == 0);
}

TEST_CASE("WorkerPool serves concurrent callers (one in the pool, the others inline)") {
  WorkerPool pool;
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 300; ++rep) {
        std::vector<std::atomic<int>> hits(9);
        pool.Run(9, 3, [&](int p) { hits[p]++; });
        for (auto& h : hits) {
          if (h != 1) bad++;
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(bad == 0);
}

TEST_CASE("WorkerPool: after a smaller thread count, only that many threads take parts") {
  WorkerPool pool;
  pool.Run(8, 4, [](int) {});
  REQUIRE(pool.workers() == 3);
  std::set<std::thread::id> ids;
  std::mutex mu;
  for (int rep = 0; rep < 300; ++rep) {
    pool.Run(8, 2, [&](int) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
  }
  CHECK(ids.size() <= 2);
}

TEST_CASE("WorkerPool's idle workers sleep after their spin and yield phases") {
  WorkerPool pool(WorkerPool::WaitOptions{.spin_ns = 1'000'000, .yield_ns = 5'000'000});
  pool.Run(8, 3, [](int) {});
  REQUIRE(pool.workers() == 2);
  // Before: the workers spin/yield for 6 ms, then sleep (other threads of this test process,
  // e.g. OpenMP's, settle too).
  std::this_thread::sleep_for(milliseconds(200));
  const double cpu0 = ProcessCpuSeconds();
  std::this_thread::sleep_for(milliseconds(300));
  const double idle_cpu = ProcessCpuSeconds() - cpu0;
  CHECK(idle_cpu < 0.03);  // two spinning workers would burn ~0.6 s
  // And a sleeping worker still wakes for the next job.
  CHECK(PartsOverlap(pool));
}

}  // namespace worker_pool_test
}  // namespace textgen::ops
