// A SessionJournal in memory for the engine's tests: it records every change, answers them on a
// thread of its own (never inside Put / Remove, as the contract says), and can hold the answers
// back to show what waits for them.
#ifndef TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SESSION_JOURNAL_H_
#define TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SESSION_JOURNAL_H_

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/scheduler/session_journal.h"

namespace textgen::testing {

class FakeSessionJournal : public SessionJournal {
 public:
  struct Change {
    std::string id;
    std::optional<SessionRecord> record;  // nullopt: a removal
  };

  explicit FakeSessionJournal(std::vector<SessionRecord> stored = {}) : stored_(std::move(stored)) {
    thread_ = std::thread([this] { Answer(); });
  }
  ~FakeSessionJournal() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      hold_ = false;
    }
    thread_.join();
  }

  absl::StatusOr<std::vector<SessionRecord>> LoadAll() override { return stored_; }
  void Put(SessionRecord record, Done done) override {
    absl::MutexLock lock(&mu_);
    const std::string id = record.id;
    changes_.push_back({id, std::move(record)});
    waiting_.push_back(std::move(done));
  }
  void Remove(const std::string& id, Done done) override {
    absl::MutexLock lock(&mu_);
    changes_.push_back({id, std::nullopt});
    waiting_.push_back(std::move(done));
  }
  bool degraded() const override { return false; }

  // While held, changes are recorded but not answered.
  void Hold(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_ = hold;
  }
  std::vector<Change> changes() {
    absl::MutexLock lock(&mu_);
    return changes_;
  }
  // Waits (up to 10 s) until `n` changes were recorded.
  bool WaitForChanges(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changes_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }
  // The latest record of `id` (nullopt if removed or never written).
  std::optional<SessionRecord> Latest(const std::string& id) {
    absl::MutexLock lock(&mu_);
    std::optional<SessionRecord> out;
    for (const Change& c : changes_) {
      if (c.id == id) out = c.record;
    }
    return out;
  }

 private:
  void Answer() {
    while (true) {
      std::vector<Done> ready;
      {
        absl::MutexLock lock(&mu_);
        auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || (!hold_ && !waiting_.empty());
        };
        mu_.Await(absl::Condition(&go));
        if (stopping_ && waiting_.empty()) return;
        ready.swap(waiting_);
      }
      for (Done& d : ready) {
        if (d) d(absl::OkStatus());
      }
    }
  }

  const std::vector<SessionRecord> stored_;
  absl::Mutex mu_;
  std::vector<Change> changes_ ABSL_GUARDED_BY(mu_);
  std::vector<Done> waiting_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SESSION_JOURNAL_H_
