#include "engine/ops/worker_pool.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace textgen::ops {
namespace {

constexpr int kMaxParts = 0xffff;  // 16 bits of the claim word
constexpr int kMaxWorkers = 1023;

constexpr uint64_t Pack(uint32_t gen, int parts, int next) {
  return (uint64_t{gen} << 32) | (uint64_t(parts) << 16) | uint64_t(next);
}
constexpr uint32_t GenOf(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
constexpr int PartsOf(uint64_t c) { return static_cast<int>((c >> 16) & 0xffff); }
constexpr int NextOf(uint64_t c) { return static_cast<int>(c & 0xffff); }

thread_local bool t_in_part = false;  // this thread runs a part (workers: always)

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spins, then yields, until done() (the caller's wait for parts other threads hold: they are
// short, so it never sleeps).
template <typename Done>
void SpinThenYield(int64_t spin_ns, Done done) {
  const int64_t spin_end = NowNs() + spin_ns;
  for (int i = 1; !done(); ++i) {
    if (i % 64 != 0) {
      CpuRelax();
    } else if (NowNs() > spin_end) {
      sched_yield();
    }
  }
}

}  // namespace

struct WorkerPool::Worker {
  std::thread thread;
  std::atomic<bool> sleeping{false};
  std::mutex mu;
  std::condition_variable cv;
};

WorkerPool::WorkerPool() : WorkerPool(WaitOptions{}) {}
WorkerPool::WorkerPool(WaitOptions wait) : wait_(wait) {}

WorkerPool::~WorkerPool() {
  stop_.store(true);
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->cv.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

WorkerPool& WorkerPool::Global() {
  static WorkerPool* pool = new WorkerPool();
  return *pool;
}

int WorkerPool::workers() const { return worker_count_.load(std::memory_order_relaxed); }

void WorkerPool::Run(int parts, int threads, absl::FunctionRef<void(int part)> fn) {
  const int helpers = std::min({threads - 1, parts - 1, kMaxWorkers});
  auto inline_all = [&] {
    for (int p = 0; p < parts; ++p) fn(p);
  };
  if (helpers <= 0 || parts > kMaxParts || t_in_part || omp_in_parallel()) return inline_all();
  std::unique_lock<std::mutex> lock(run_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return inline_all();
  if (static_cast<int>(workers_.size()) < helpers) StartWorkers(helpers);

  generation_ = generation_ == UINT32_MAX ? 1 : generation_ + 1;
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  allowed_.store(helpers, std::memory_order_relaxed);
  // seq_cst: ordered before the reads of each worker's `sleeping` flag in WakeSleepers (a worker
  // sets the flag, then reads claim_, so one of the two sees the other).
  claim_.store(Pack(generation_, parts, 0), std::memory_order_seq_cst);
  WakeSleepers(helpers);

  t_in_part = true;
  Drain(generation_);
  t_in_part = false;
  SpinThenYield(wait_.spin_ns, [&] { return done_.load(std::memory_order_acquire) == parts; });
  fn_ = nullptr;
}

void WorkerPool::StartWorkers(int count) {
  while (static_cast<int>(workers_.size()) < count) {
    const int index = static_cast<int>(workers_.size());
    workers_.push_back(std::make_unique<Worker>());
    Worker* w = workers_.back().get();  // the vector may move while the thread starts
    w->thread = std::thread([this, w, index] { WorkerMain(*w, index); });
    pthread_setname_np(workers_.back()->thread.native_handle(),
                       ("textgen-pool-" + std::to_string(index)).c_str());
  }
  worker_count_.store(count, std::memory_order_relaxed);
}

void WorkerPool::WakeSleepers(int allowed) {
  for (int i = 0; i < allowed; ++i) {
    Worker& w = *workers_[i];
    if (!w.sleeping.load(std::memory_order_seq_cst)) continue;
    std::lock_guard<std::mutex> lock(w.mu);
    w.cv.notify_one();
  }
}

bool WorkerPool::JobFor(int index, uint32_t seen, uint32_t* gen) const {
  *gen = GenOf(claim_.load(std::memory_order_acquire));
  return *gen != seen && index < allowed_.load(std::memory_order_relaxed);
}

uint32_t WorkerPool::AwaitJob(Worker& w, int index, uint32_t seen) {
  // The generation that passed the check is the one to join: re-reading claim_ afterwards could
  // return a newer job that this worker is not allowed into (a call with fewer threads).
  uint32_t gen = 0;
  auto ready = [&] { return stop_.load(std::memory_order_relaxed) || JobFor(index, seen, &gen); };
  const int64_t start = NowNs();
  for (int i = 1; !ready(); ++i) {
    if (i % 64 != 0) {
      CpuRelax();
      continue;
    }
    const int64_t waited = NowNs() - start;
    if (waited < wait_.spin_ns) continue;
    if (waited < wait_.spin_ns + wait_.yield_ns && index < allowed_.load()) {
      sched_yield();
      continue;
    }
    // Sleep. The flag is set before the condition is read again (seq_cst, see Run).
    std::unique_lock<std::mutex> lock(w.mu);
    w.sleeping.store(true, std::memory_order_seq_cst);
    w.cv.wait(lock, ready);
    w.sleeping.store(false, std::memory_order_relaxed);
    break;
  }
  return stop_.load() ? 0 : gen;
}

void WorkerPool::WorkerMain(Worker& w, int index) {
  t_in_part = true;  // a part that calls ParallelFor runs it inline
  uint32_t seen = 0;
  for (;;) {
    const uint32_t gen = AwaitJob(w, index, seen);
    if (gen == 0) return;
    seen = gen;
    Drain(gen);
  }
}

void WorkerPool::Drain(uint32_t gen) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (GenOf(c) == gen && NextOf(c) < PartsOf(c)) {
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // c reloaded
    }
    (*fn_)(NextOf(c));
    done_.fetch_add(1, std::memory_order_release);
    c = claim_.load(std::memory_order_acquire);
  }
}

}  // namespace textgen::ops
