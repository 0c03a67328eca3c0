// A shared session store in memory for the engine's tests: several FakeSharedJournals (one per
// engine, as several servers on one Redis) read and write one SharedRecords, which keeps the
// rules session_journal.h states for shared stores (a Put must raise the version; a removed id
// takes only a creation). The store can be made unreachable: Gets fail at once, writes fail and
// stay pending until it is reachable again, as the real journal's do.
#ifndef TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SHARED_STORE_H_
#define TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SHARED_STORE_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/scheduler/session_journal.h"

namespace textgen::testing {

class SharedRecords {
 public:
  // Applies one change under the shared-store rules; false if the store refused it.
  bool Apply(const std::string& id, const std::optional<SessionRecord>& record) {
    absl::MutexLock lock(&mu_);
    Entry& e = entries_[id];
    if (!record.has_value()) {
      e.record.reset();
      e.tombstone = true;
      return true;
    }
    if (e.record.has_value() && record->version <= e.record->version) return false;
    if (e.tombstone && record->version > 0) return false;
    e.record = record;
    e.tombstone = false;
    return true;
  }
  std::optional<SessionRecord> Get(const std::string& id) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second.record;
  }
  // Drops a record as the store's own expiry would (no tombstone).
  void Expire(const std::string& id) {
    absl::MutexLock lock(&mu_);
    entries_.erase(id);
  }
  void SetReachable(bool reachable) {
    absl::MutexLock lock(&mu_);
    reachable_ = reachable;
  }
  bool reachable() {
    absl::MutexLock lock(&mu_);
    return reachable_;
  }

 private:
  struct Entry {
    std::optional<SessionRecord> record;
    bool tombstone = false;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
};

class FakeSharedJournal : public SessionJournal {
 public:
  explicit FakeSharedJournal(std::shared_ptr<SharedRecords> store) : store_(std::move(store)) {
    thread_ = std::thread([this] { Write(); });
  }
  ~FakeSharedJournal() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  absl::StatusOr<std::vector<SessionRecord>> LoadAll() override {
    return std::vector<SessionRecord>{};
  }
  void Put(SessionRecord record, Done done) override {
    const std::string id = record.id;
    Enqueue(id, std::move(record), std::move(done));
  }
  void Remove(const std::string& id, Done done) override {
    Enqueue(id, std::nullopt, std::move(done));
  }
  bool shared() const override { return true; }
  absl::StatusOr<std::optional<SessionRecord>> Get(const std::string& id) override {
    if (!store_->reachable()) return absl::UnavailableError("the shared store is unreachable");
    return store_->Get(id);
  }
  bool degraded() const override {
    absl::MutexLock lock(&mu_);
    return degraded_;
  }
  // Waits (up to 10 s) until every change handed over so far reached the store.
  bool WaitWritten() {
    absl::MutexLock lock(&mu_);
    auto written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return queue_.empty() && pending_.empty() && !writing_;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&written), absl::Seconds(10));
  }

 private:
  struct Change {
    std::string id;
    std::optional<SessionRecord> record;
    Done done;
  };

  void Enqueue(const std::string& id, std::optional<SessionRecord> record, Done done) {
    absl::MutexLock lock(&mu_);
    queue_.push_back({id, std::move(record), std::move(done)});
  }

  // Answers each change on this thread: written (OK, whether the store kept it or refused it),
  // or, while unreachable, failed and kept to be written once the store is back.
  void Write() {
    while (true) {
      std::deque<Change> batch;
      {
        absl::MutexLock lock(&mu_);
        auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queue_.empty() || !pending_.empty();
        };
        mu_.AwaitWithTimeout(absl::Condition(&go), absl::Milliseconds(20));
        if (stopping_) return;
        batch.swap(queue_);
        writing_ = !batch.empty();
      }
      const bool reachable = store_->reachable();
      std::vector<std::pair<Done, absl::Status>> answers;
      {
        absl::MutexLock lock(&mu_);
        if (reachable) {
          for (Change& c : pending_) store_->Apply(c.id, c.record);
          pending_.clear();
        }
        degraded_ = !reachable;
      }
      for (Change& c : batch) {
        if (reachable) {
          store_->Apply(c.id, c.record);
          answers.emplace_back(std::move(c.done), absl::OkStatus());
        } else {
          answers.emplace_back(std::move(c.done), absl::UnavailableError("unreachable"));
          absl::MutexLock lock(&mu_);
          pending_.push_back({c.id, std::move(c.record), nullptr});
        }
      }
      for (auto& [done, status] : answers) {
        if (done) done(status);
      }
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
  }

  const std::shared_ptr<SharedRecords> store_;
  mutable absl::Mutex mu_;
  std::deque<Change> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Change> pending_ ABSL_GUARDED_BY(mu_);
  bool degraded_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a batch is between the queue and the store
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_SCHEDULER_FAKE_SHARED_STORE_H_
