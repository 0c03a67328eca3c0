// The completions in flight on the HTTP API, so that a shutdown can wait for them and cancel
// those still running when the grace period ends. Thread-safe.
#ifndef TEXTGEN_SERVER_OPENAI_RUN_REGISTRY_H_
#define TEXTGEN_SERVER_OPENAI_RUN_REGISTRY_H_

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/openai/completion_run.h"

namespace textgen::server::openai {

class RunRegistry {
 public:
  void Add(CompletionRun* run) {
    absl::MutexLock lock(&mu_);
    runs_.insert(run);
  }
  void Remove(CompletionRun* run) {
    absl::MutexLock lock(&mu_);
    runs_.erase(run);
  }
  // Waits until none is left or `deadline` passes; true if none is left.
  bool WaitEmpty(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto empty = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_.empty(); };
    return mu_.AwaitWithDeadline(absl::Condition(&empty), deadline);
  }
  void CancelAll() {
    absl::MutexLock lock(&mu_);
    for (CompletionRun* run : runs_) run->Cancel();
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<CompletionRun*> runs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_RUN_REGISTRY_H_
