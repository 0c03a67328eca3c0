// Thread count of the ops' multi-threaded kernels (oneDNN, which runs on OpenMP).
//
// OpenMP keeps its thread-count setting per calling thread, so a plain omp_set_num_threads()
// on the main thread would not reach server worker threads. Instead the count is stored
// process-wide here and each kernel entry point calls ApplyThreadCountToThisThread(), which
// forwards it to OpenMP on that thread only when it changed (a thread-local compare).
#ifndef TEXTGEN_ENGINE_OPS_THREADING_H_
#define TEXTGEN_ENGINE_OPS_THREADING_H_

#include <cstdint>

namespace textgen::ops {

// Sets the threads used by each multi-threaded op call (n >= 1; values < 1 mean 1). Safe to
// call at any time from any thread; calls already running keep their old count.
void SetNumThreads(int n);
// The current setting. Default: the number of online CPUs (std::thread::hardware_concurrency).
int NumThreads();

// A good setting for a model whose largest matmul weight has `max_weight_elems` elements.
// Tiny models (stories260K: largest weight 512x64) decode fastest on one thread: an OpenMP
// fork/join costs ~2-3 us, more than the whole matmul (and far more when the cores are shared
// with other busy processes: a descheduled team member stalls the join for a time slice).
// Calls on Linear's direct kernel are single-threaded anyway; this governs the rest.
int RecommendedNumThreads(int64_t max_weight_elems);

namespace internal {
// Forwards NumThreads() to OpenMP for the calling thread if it differs from what this thread
// last applied. Cheap (one atomic load and a compare) when nothing changed.
void ApplyThreadCountToThisThread();
}  // namespace internal

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_THREADING_H_
