// Thread count of the ops' multi-threaded kernels (oneDNN and the GEMV kernels, both on the
// same OpenMP runtime, so they share one team of threads).
//
// OpenMP keeps its thread-count setting per calling thread, so a plain omp_set_num_threads()
// on the main thread would not reach server worker threads. Instead the count is stored
// process-wide here and each kernel entry point calls ApplyThreadCountToThisThread(), which
// forwards it to OpenMP on that thread only when it changed (a thread-local compare).
//
// Waiting: OpenMP workers spin between parallel regions before they sleep. libgomp spins for
// up to 300,000 PAUSEs by default (~10 ms on recent Intel cores, where PAUSE takes ~140
// cycles), so when other processes compete for the cores a spinning worker burns the time
// slice a descheduled team member needs to reach the barrier. Setting GOMP_SPINCOUNT from
// the process itself does not work (a .preinit_array setenv is undone when libc initializes
// its environment, before libgomp reads it), so a short spin is the operator's choice
// (README, "Kernel levels and threads").
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
// Tiny models (stories260K: largest weight 512x64) decode fastest on one thread: an OpenMP
// fork/join costs ~2-3 us, more than the whole matmul (and far more when the cores are shared
// with other busy processes: a descheduled team member stalls the join for a time slice).
// Calls on Linear's direct kernel are single-threaded anyway; this governs the rest.
int RecommendedNumThreads(int64_t max_weight_elems);

// Runs fn(begin, end) over [0, n) cut into one contiguous range per thread (range starts are
// multiples of `align`), on min(threads, ceil(n / align)) OpenMP threads. With one range it
// runs inline on the calling thread. Inside another parallel region OpenMP runs it on one
// thread. fn must be safe to run concurrently on disjoint ranges.
void ParallelFor(int64_t n, int64_t align, int threads,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> fn);

// Runs fn(i) for every i in [0, n) on up to `threads` OpenMP threads, handing out indices one at
// a time (for items of unequal cost, e.g. causal attention rows). Inline when threads <= 1 or
// n <= 1.
void ParallelForEach(int64_t n, int threads, absl::FunctionRef<void(int64_t i)> fn);

namespace internal {
// Forwards NumThreads() to OpenMP for the calling thread if it differs from what this thread
// last applied. Cheap (one atomic load and a compare) when nothing changed.
void ApplyThreadCountToThisThread();
}  // namespace internal

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_THREADING_H_
