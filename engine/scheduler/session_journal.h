// Where sessions go to outlive the process: an append-and-replace log of session records that
// SessionStore writes on a session's creation, each committed turn, its deletion and its expiry,
// and reads back at start. Store-agnostic (SQLite now, Redis later): the engine never sees how.
#ifndef TEXTGEN_ENGINE_SCHEDULER_SESSION_JOURNAL_H_
#define TEXTGEN_ENGINE_SCHEDULER_SESSION_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace textgen {

// One session as it is stored: everything a restarted server needs to continue it (its KV is
// recomputed from the tokens).
struct SessionRecord {
  std::string id;
  std::string owner;
  std::vector<int32_t> tokens;
  std::string attachment;
  uint64_t version = 0;
  absl::Time created;
  absl::Time last_used;
  absl::Duration ttl;  // the server's TTL when it was written (a restart applies its own)
};

// Thread-safe. Writes are asynchronous and ordered: for one id, the last Put or Remove called is
// what the store ends up with. `done` runs exactly once, never inside the call that passed it
// (callers may hold locks the callback takes), with OK once the change is durable, or the error
// that kept it in memory only (the journal then is degraded() and retries later). A shared
// store refuses (silently: `done` gets OK) a Put whose version is not above the one it holds,
// so a replica with a stale copy cannot overwrite a newer turn, and a Put of version > 0 for
// an id it saw Removed, so a turn ending late cannot bring back a deleted session (a creation,
// version 0, may reuse a removed id).
class SessionJournal {
 public:
  using Done = std::function<void(absl::Status)>;

  virtual ~SessionJournal() = default;
  // Every stored session. Called once, before any Put or Remove. A shared store may return none
  // and let Get bring each session in when a turn asks for it.
  virtual absl::StatusOr<std::vector<SessionRecord>> LoadAll() = 0;
  // True when other servers write to the same store (e.g. Redis): a record may change, appear
  // or go behind this process's back, so SessionStore asks Get before it trusts its own copy.
  virtual bool shared() const { return false; }
  // Shared stores: the record of `id` as the store holds it now, or nullopt when it holds none
  // (never created, deleted, expired). Blocking (one round trip): request threads only, never
  // the decode loop. Unavailable when the store cannot be reached in time (the caller goes on
  // with what it holds); it must then return at once while the store stays unreachable.
  virtual absl::StatusOr<std::optional<SessionRecord>> Get(const std::string& id) {
    (void)id;
    return std::nullopt;
  }
  // Stores `record`, replacing the one of the same id. `done` may be empty.
  virtual void Put(SessionRecord record, Done done) = 0;
  // Removes the record of `id` (none: nothing to do). `done` may be empty.
  virtual void Remove(const std::string& id, Done done) = 0;
  // True while changes stay in memory only: the store could not be opened or its latest write
  // failed (unwritable, full disk, unreachable). Sessions keep working either way.
  virtual bool degraded() const = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_SESSION_JOURNAL_H_
