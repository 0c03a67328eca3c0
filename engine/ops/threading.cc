#include "engine/ops/threading.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

#include "engine/ops/cpu_budget.h"
#include "engine/ops/worker_pool.h"

namespace textgen::ops {
namespace {

int DefaultThreads() { return ProcessCpuBudget().threads; }

std::atomic<int> g_num_threads{0};  // 0: DefaultThreads(), read at the first NumThreads()

}  // namespace

void SetNumThreads(int n) { g_num_threads.store(std::max(1, n), std::memory_order_relaxed); }

int NumThreads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : DefaultThreads();
}

int DefaultNumThreads() { return DefaultThreads(); }

std::string DescribeThreadDefault() { return DescribeCpuBudget(ProcessCpuBudget()); }

int RecommendedNumThreads(int64_t max_weight_elems) {
  // Below ~1M weights (4 MB of F32, roughly L2-resident) a matmul of a decode batch takes a few
  // microseconds, which a fork/join of the OpenMP team would double.
  constexpr int64_t kSmallModelWeightElems = int64_t{1} << 20;
  return max_weight_elems < kSmallModelWeightElems ? 1 : DefaultThreads();
}

void ParallelFor(int64_t n, int64_t align, int threads,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(align, 1);
  const int64_t units = (n + align - 1) / align;
  threads = std::max(threads, 1);
  const int parts = static_cast<int>(
      std::min<int64_t>(units, threads == 1 ? 1 : int64_t{threads} * kRangesPerThread));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  // Equal ranges (rows of one matrix), several per thread: claimed one at a time, so a thread
  // that is descheduled (another process wants its core) leaves its share to the others.
  WorkerPool::Global().Run(parts, threads, [&](int p) {
    const int64_t begin = std::min(n, units * p / parts * align);
    const int64_t end = std::min(n, units * (p + 1) / parts * align);
    if (begin < end) fn(begin, end);
  });
}

void ParallelForEach(int64_t n, int threads, absl::FunctionRef<void(int64_t i)> fn) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const int team = static_cast<int>(std::min<int64_t>(threads, n));
  std::atomic<int64_t> next{0};
  WorkerPool::Global().Run(team, team, [&](int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i);
    }
  });
}

namespace internal {

void ApplyThreadCountToThisThread() {
  thread_local int applied = 0;  // 0: never applied on this thread
  const int want = NumThreads();
  if (applied == want) return;
  omp_set_num_threads(want);
  applied = want;
}

}  // namespace internal
}  // namespace textgen::ops
