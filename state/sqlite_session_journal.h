// The session journal in SQLite: DIR/sessions.sqlite3 (WAL mode) under the lock DIR/sessions.lock,
// written by one thread of its own, so that neither the decode loop nor a request thread waits on
// the disk (the engine delays only a turn's OnDone until its record is committed).
#ifndef TEXTGEN_STATE_SQLITE_SESSION_JOURNAL_H_
#define TEXTGEN_STATE_SQLITE_SESSION_JOURNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/scheduler/session_journal.h"
#include "state/dir_lock.h"

struct sqlite3;

namespace textgen::state {

struct SqliteJournalOptions {
  std::string dir;  // created if missing
  // true (synchronous=FULL): the WAL is fsynced at every commit, so a turn whose answer the
  // client saw end survives a power loss or an OS crash. false (NORMAL): no fsync at commit
  // (only at checkpoints): a committed turn survives the process's crash (kill -9, OOM), but
  // the latest turns may be lost with the machine (never a torn record: the database stays
  // consistent).
  bool sync_full = true;
  // Move an existing database aside (DIR/sessions.sqlite3.broken-<UTC time>) and start empty:
  // the way out of a corrupted or too new database.
  bool reset = false;
  // Tests: the database may not grow beyond this many pages (as if the disk were full); 0: no
  // limit.
  int64_t max_pages = 0;
};

class SqliteSessionJournal final : public SessionJournal {
 public:
  // The layout this binary writes; older files are migrated at open, step by step.
  static constexpr int kSchemaVersion = 1;

  // Opens (or creates) the database. Refusals, for which the server must not start:
  // FailedPrecondition naming the file when another process holds the directory's lock, when
  // the database is corrupted or is not one, or when its schema is newer than kSchemaVersion
  // (the messages name --state-reset). Anything else that keeps it from writing (the directory
  // cannot be created or written, a full disk) gives a degraded journal: it logs a warning,
  // loads nothing and keeps nothing (sessions live in memory only).
  static absl::StatusOr<std::unique_ptr<SqliteSessionJournal>> Open(
      const SqliteJournalOptions& options);
  // Writes what is pending (one attempt), then closes the database and releases the lock.
  ~SqliteSessionJournal() override;

  absl::StatusOr<std::vector<SessionRecord>> LoadAll() override;
  void Put(SessionRecord record, Done done) override;
  void Remove(const std::string& id, Done done) override;
  bool degraded() const override { return degraded_.load(); }

  // DIR/sessions.sqlite3.
  const std::string& path() const { return path_; }

 private:
  // One id's latest change: its record, or its removal (nullopt); and who waits for it.
  struct Change {
    std::optional<SessionRecord> record;
    std::vector<Done> done;
  };
  using Batch = absl::flat_hash_map<std::string, Change>;

  SqliteSessionJournal(std::string path, std::unique_ptr<DirLock> lock, sqlite3* db,
                       std::string unavailable);
  void Enqueue(const std::string& id, std::optional<SessionRecord> record, Done done);
  void WriterLoop();
  // One transaction for the whole batch: all of it or nothing.
  absl::Status Write(const Batch& batch);

  const std::string path_;
  const std::unique_ptr<DirLock> lock_;  // null when degraded from the start
  sqlite3* db_;                          // null when degraded from the start
  const std::string unavailable_;        // why db_ is null
  std::atomic<bool> degraded_;

  absl::Mutex mu_;
  Batch pending_ ABSL_GUARDED_BY(mu_);
  bool fresh_ ABSL_GUARDED_BY(mu_) = false;  // a change arrived since the last write
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
};

}  // namespace textgen::state

#endif  // TEXTGEN_STATE_SQLITE_SESSION_JOURNAL_H_
