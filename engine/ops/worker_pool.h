// The compute threads behind ops::ParallelFor and ops::ParallelForEach (oneDNN keeps its own
// OpenMP team).
//
// Why not OpenMP for these: between parallel regions libgomp's workers spin for up to 300,000
// PAUSEs (~10 ms on Ice Lake) and then sleep on a futex. When another process competes for the
// cores, a spinning worker keeps a core that the descheduled caller needs, and decode collapses
// (measured: 318 -> 96 tok/s with a one-core hog on 2 cores); a short spin makes every wake-up a
// futex wake, which on a VM costs more than a decode step's matmul (passive halves quiet
// decode). This pool's workers wait in three phases: a short PAUSE spin (the gaps inside a
// forward pass), then sched_yield() (returns at once on a quiet core, gives the core away when
// something else wants it), and only after several milliseconds without work a condition
// variable, so an idle server uses no CPU.
//
// A job is cut into parts that every participant (the caller and the workers) claims one at a
// time from one atomic word, so when a worker is late (descheduled, or still waking) the others
// take its share: which thread runs a part never changes what the part computes.
#ifndef TEXTGEN_ENGINE_OPS_WORKER_POOL_H_
#define TEXTGEN_ENGINE_OPS_WORKER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace textgen::ops {

class WorkerPool {
 public:
  // How long an idle worker spins and then yields before it sleeps.
  struct WaitOptions {
    int64_t spin_ns = 20'000;
    int64_t yield_ns = 5'000'000;
  };

  WorkerPool();
  explicit WorkerPool(WaitOptions wait);
  // Stops and joins the workers. No Run() may be in progress.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The process-wide pool (created at first use, never destroyed: workers may still be
  // waiting when the process exits).
  static WorkerPool& Global();

  // Runs fn(part) exactly once for every part in [0, parts), on the calling thread and up to
  // `threads - 1` workers (started on first need), and returns when all parts are done. fn must
  // be safe to run concurrently for different parts and must not throw. Runs every part inline,
  // in order, when parts or threads <= 1, when parts > 65,535 (the claim word's field), when
  // called from inside a part (nesting), from inside an OpenMP parallel region, or while another
  // thread's job is running on this pool.
  void Run(int parts, int threads, absl::FunctionRef<void(int part)> fn);

  // Workers started so far (for tests and logs).
  int workers() const;

 private:
  struct Worker;

  void StartWorkers(int count);  // requires run_mu_
  void WorkerMain(Worker& w, int index);
  // Waits until a job newer than `seen` is published for a worker of this index, or stop.
  // Returns the job's generation, or 0 on stop.
  uint32_t AwaitJob(Worker& w, int index, uint32_t seen);
  bool JobFor(int index, uint32_t seen, uint32_t* gen) const;
  // Claims and runs parts of job `gen` until none is left.
  void Drain(uint32_t gen);
  void WakeSleepers(int allowed);

  const WaitOptions wait_;
  std::mutex run_mu_;  // one job at a time; guards workers_ growth
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> worker_count_{0};
  // The current job: generation (high 32 bits, never 0 once published), part count (16 bits),
  // next unclaimed part (low 16 bits). Parts are claimed by compare-and-swap on this word, so a
  // claim can only take a part of the job it saw.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> allowed_{0};  // workers [0, allowed_) may join the current job
  std::atomic<int> done_{0};     // parts of the current job finished
  std::atomic<bool> stop_{false};
  // Written before claim_ is published; read only by a thread holding a claimed part.
  const absl::FunctionRef<void(int)>* fn_ = nullptr;
  uint32_t generation_ = 0;  // requires run_mu_
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_WORKER_POOL_H_
