// The session journal in Redis, for replicas that share their sessions: one hash per session
// (textgen:session:<id>), written by a thread of the journal's own over its own connection, each
// write a compare-and-set in one Lua script, so that a replica with a stale copy never
// overwrites a newer turn and a turn ending late never brings back a deleted session. Get reads
// a record on the caller's thread over a second connection. Redis being down, hung or slow
// never stops or slows a turn: the journal is degraded(), answers at once, keeps the changes
// and writes them when Redis is back. The layout: docs/deployment.md#sessions-in-redis.
#ifndef TEXTGEN_STATE_REDIS_SESSION_JOURNAL_H_
#define TEXTGEN_STATE_REDIS_SESSION_JOURNAL_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/scheduler/session_journal.h"
#include "state/redis_url.h"

namespace textgen::state {

class RedisConnection;

struct RedisJournalOptions {
  std::string url;                                   // redis://HOST[:PORT][/DB] (DB default 0)
  absl::Duration timeout = absl::Milliseconds(500);  // connect and each command
  absl::Duration tombstone_ttl = absl::Hours(24);    // how long a Removed id is remembered
};

class RedisSessionJournal final : public SessionJournal {
 public:
  // Every key this journal writes begins so.
  static constexpr char kKeyPrefix[] = "textgen:session:";
  // The record layout (the hash field "format"); a record of another format is refused, never
  // overwritten.
  static constexpr char kFormat[] = "1";

  // InvalidArgument (naming the URL's problem) for a malformed URL or a timeout or tombstone TTL
  // that is not positive. FailedPrecondition when the server answers and refuses the
  // connection (no such database, a password is required): a configuration error that waiting
  // will not cure. An unreachable server is NOT an error: the journal starts degraded, logs a
  // warning and connects in the background.
  static absl::StatusOr<std::unique_ptr<RedisSessionJournal>> Open(
      const RedisJournalOptions& options);
  // One last write attempt of what is pending (each `done` still waiting is called), then stops.
  // Against a hung Redis that attempt takes a few timeouts (connect, SELECT, the write).
  ~RedisSessionJournal() override;

  // Always none: sessions come in lazily through Get.
  absl::StatusOr<std::vector<SessionRecord>> LoadAll() override;
  // Asynchronous (see SessionJournal). `done` gets OK once Redis holds the change, or holds a
  // newer record (a refused Put is not an error); Unavailable at once while degraded, and when
  // the write fails (Redis gone, hung, out of memory): the change stays pending and is written
  // on reconnection, the last per id winning; FailedPrecondition when the key holds something
  // that is not a session record of this layout (the change is dropped).
  void Put(SessionRecord record, Done done) override;
  void Remove(const std::string& id, Done done) override;
  // One HGETALL on the caller's thread, under a mutex, within the timeout. nullopt for a
  // missing key or a tombstone; Unavailable at once while degraded, or when Redis does not
  // answer in time (the journal is then degraded until the writer reconnects);
  // FailedPrecondition when the key holds something else than a session record of this layout.
  absl::StatusOr<std::optional<SessionRecord>> Get(const std::string& id) override;
  bool degraded() const override { return degraded_.load(); }
  bool shared() const override { return true; }

  // "HOST:PORT/DB", for logs.
  const std::string& address() const { return address_; }

 private:
  // One id's latest change and who waits for it.
  struct Change {
    std::optional<SessionRecord> record;  // nullopt: a removal
    bool remove_first = false;            // a Remove came before `record`: tombstone, then put
    std::vector<Done> done;
  };
  using Batch = absl::flat_hash_map<std::string, Change>;

  RedisSessionJournal(const RedisJournalOptions& options, RedisUrl url,
                      std::unique_ptr<RedisConnection> writer_conn, std::string outage);
  void Enqueue(const std::string& id, std::optional<SessionRecord> record, Done done);
  void WriterLoop();
  void AnswerLoop();
  // Connects if needed, then writes `batch` in one pipeline (PING if it is empty). Changes
  // written, refused or dropped leave `batch` with their `done`s called; the rest stay in it.
  // Not OK when Redis could not be reached or refused a write for a while (out of memory, a
  // read-only replica).
  absl::Status Attempt(Batch& batch);
  absl::Status WriteBatch(Batch& batch);  // Attempt's pipeline, on a connection
  absl::Status Ping();
  absl::Status LoadScript();
  // Get's connection failed: degraded until the writer reaches Redis again.
  void MarkUnreachable(const absl::Status& why);
  // Starts an outage (logged once) or keeps it; the status `done`s get while it lasts.
  void Degrade(const absl::Status& why);
  absl::Status OutageStatus() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisUrl url_;
  const std::string address_;
  const absl::Duration timeout_;
  const absl::Duration tombstone_ttl_;
  std::atomic<bool> degraded_;

  absl::Mutex mu_;
  Batch pending_ ABSL_GUARDED_BY(mu_);
  bool fresh_ ABSL_GUARDED_BY(mu_) = false;  // a change arrived since the writer last looked
  bool probe_ ABSL_GUARDED_BY(mu_) = false;  // Get found Redis unreachable
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string outage_ ABSL_GUARDED_BY(mu_);  // why Redis is unreachable, while degraded
  // `done`s to call with an error at once (while degraded), by the answer thread: the writer
  // may be inside a connect or a command that takes up to the timeout.
  std::vector<std::pair<Done, absl::Status>> answers_ ABSL_GUARDED_BY(mu_);

  // The writer thread's own.
  std::unique_ptr<RedisConnection> writer_conn_;
  std::string script_sha_;

  absl::Mutex get_mu_;
  std::unique_ptr<RedisConnection> get_conn_ ABSL_GUARDED_BY(get_mu_);

  std::thread writer_;
  std::thread answerer_;
};

}  // namespace textgen::state

#endif  // TEXTGEN_STATE_REDIS_SESSION_JOURNAL_H_
