// Shared by the engine tests: a sink that collects a request's stream.
#ifndef TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/scheduler/engine.h"

namespace textgen::testing {

// Collects a request's stream; Wait() blocks until OnDone.
class CollectingSink : public GenerationSink {
 public:
  void OnDelta(const StreamDelta& d) override {
    absl::MutexLock lock(&mu_);
    for (const auto& t : d.tokens) ids_.push_back(t.id);
    text_ += d.text;
    ++deltas_;
  }
  void OnDone(absl::StatusOr<GenerationResult> r) override {
    {
      absl::MutexLock lock(&mu_);
      ++done_calls_;
      result_ = std::move(r);
    }
    done_.Notify();
  }
  const absl::StatusOr<GenerationResult>& Wait() {
    done_.WaitForNotification();
    return result_;
  }
  std::vector<int32_t> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }
  int deltas() {
    absl::MutexLock lock(&mu_);
    return deltas_;
  }
  int done_calls() {
    absl::MutexLock lock(&mu_);
    return done_calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int32_t> ids_;
  std::string text_;
  int deltas_ = 0;
  int done_calls_ = 0;
  absl::StatusOr<GenerationResult> result_ = absl::UnknownError("not done");
  absl::Notification done_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_
