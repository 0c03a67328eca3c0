// A few threads for the work a request may bring that is too big for gRPC's own threads:
// tokenizing a long prompt, rendering and tokenizing a long chat. gRPC's callback threads are
// few and shared by every RPC (the health service's included), so a handful of clients sending
// megabyte prompts would otherwise stall health checks and small requests for seconds. The
// queue is bounded: beyond it TryPost refuses and the caller answers RESOURCE_EXHAUSTED at once.
#ifndef TEXTGEN_SERVER_PROMPT_WORKERS_H_
#define TEXTGEN_SERVER_PROMPT_WORKERS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace textgen::server {

// Thread-safe.
class PromptWorkers {
 public:
  // `threads` >= 1 run the tasks, oldest first; at most `max_pending` wait.
  PromptWorkers(int threads, int max_pending);
  // Stop().
  ~PromptWorkers();
  PromptWorkers(const PromptWorkers&) = delete;
  PromptWorkers& operator=(const PromptWorkers&) = delete;

  // Queues `task`; false (task not run) when max_pending tasks wait or after Stop.
  bool TryPost(std::function<void()> task);
  // Runs the tasks already queued, then joins the threads; idempotent. Call before what the
  // tasks use (the engine) goes away.
  void Stop();
  int max_pending() const { return max_pending_; }

 private:
  void Run();

  const int max_pending_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PROMPT_WORKERS_H_
