// Thread count of the ops' multi-threaded kernels, and their parallel loops.
//
// ParallelFor and ParallelForEach run on the engine's own WorkerPool (engine/ops/worker_pool.h:
// workers that spin briefly, then yield, then sleep, and parts claimed one at a time, so decode
// keeps about its share of the CPU when other processes compete for the cores). oneDNN runs on
// OpenMP, whose thread-count setting is kept per calling thread: a plain omp_set_num_threads()
// on the main thread would not reach server worker threads. So the count is stored
// process-wide here and oneDNN's entry points call ApplyThreadCountToThisThread(), which
// forwards it to OpenMP on that thread only when it changed (a thread-local compare).
#ifndef TEXTGEN_ENGINE_OPS_THREADING_H_
#define TEXTGEN_ENGINE_OPS_THREADING_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"

namespace textgen::ops {

// Sets the threads used by each multi-threaded op call (n >= 1; values < 1 mean 1). Safe to
// call at any time from any thread; calls already running keep their old count.
void SetNumThreads(int n);
// The current setting. Default: DefaultNumThreads().
int NumThreads();

// The CPUs this process may use: the affinity mask's count, capped by the cgroup CPU quota
// (engine/ops/cpu_budget.h). Read once.
int DefaultNumThreads();
// Why: "2 compute threads (2 CPUs online, 2 in the affinity mask, no cgroup CPU quota)".
std::string DescribeThreadDefault();

// A good setting for a model whose largest matmul weight has `max_weight_elems` elements.
// Tiny models (stories260K: largest weight 512x64) decode fastest on one thread: a fork/join
// costs ~1-3 us, more than the whole matmul (and far more when the cores are shared
// with other busy processes: a descheduled team member stalls the join for a time slice).
// Calls on Linear's direct kernel are single-threaded anyway; this governs the rest.
int RecommendedNumThreads(int64_t max_weight_elems);

// Runs fn(begin, end) over [0, n) cut into equal contiguous ranges (starts are multiples of
// `align`; up to kRangesPerThread per thread, fewer when n / align is smaller) on the calling
// thread and up to threads - 1 pool workers. The ranges depend only on (n, align, threads), not
// on which thread runs them. With one range, or from inside another ParallelFor/ForEach or an
// OpenMP region, it runs inline on the calling thread. fn must be safe to run concurrently on
// disjoint ranges.
// Ranges per thread: when another process takes a core, the threads that keep theirs take the
// ranges a descheduled thread has not claimed (measured under a one-core hog on 2 cores: decode
// keeps ~55% of its quiet speed, OpenMP's static split kept ~30%).
inline constexpr int kRangesPerThread = 8;

void ParallelFor(int64_t n, int64_t align, int threads,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// Runs fn(i) for every i in [0, n) on up to `threads` threads (the caller and pool workers),
// handing out indices one at a time (for items of unequal cost, e.g. causal attention rows). Inline
// when threads <= 1 or n <= 1.
void ParallelForEach(int64_t n, int threads, absl::FunctionRef<void(int64_t i)> fn);

namespace internal {
// Forwards NumThreads() to OpenMP for the calling thread if it differs from what this thread
// last applied. Cheap (one atomic load and a compare) when nothing changed.
void ApplyThreadCountToThisThread();
}  // namespace internal

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_THREADING_H_
