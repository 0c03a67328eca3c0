#include "engine/ops/threading.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace textgen::ops {
namespace {

int DefaultThreads() {
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

std::atomic<int> g_num_threads{DefaultThreads()};

using OmpSetNumThreadsFn = void (*)(int);

// libgomp is loaded as a dependency of libdnnl, but textgen_ops is not compiled with -fopenmp
// (that flag belongs to the build files of engine/, and nothing here needs OpenMP pragmas), so
// the symbol is looked up at run time instead of linked. nullptr if the process has no OpenMP
// runtime (e.g. a oneDNN built with TBB or sequential threading): then the setting is a no-op.
OmpSetNumThreadsFn OmpSetNumThreads() {
  static const OmpSetNumThreadsFn fn =
      reinterpret_cast<OmpSetNumThreadsFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return fn;
}

}  // namespace

void SetNumThreads(int n) { g_num_threads.store(std::max(1, n), std::memory_order_relaxed); }

int NumThreads() { return g_num_threads.load(std::memory_order_relaxed); }

int RecommendedNumThreads(int64_t max_weight_elems) {
  // Below ~1M weights (4 MB of F32, roughly L2-resident) a matmul of a decode batch takes a few
  // microseconds, which a fork/join of the OpenMP team would double.
  constexpr int64_t kSmallModelWeightElems = int64_t{1} << 20;
  return max_weight_elems < kSmallModelWeightElems ? 1 : DefaultThreads();
}

namespace internal {

void ApplyThreadCountToThisThread() {
  thread_local int applied = 0;  // 0: never applied on this thread
  const int want = NumThreads();
  if (applied == want) return;
  if (OmpSetNumThreadsFn fn = OmpSetNumThreads()) fn(want);
  applied = want;
}

}  // namespace internal
}  // namespace textgen::ops
