// The engine's conversations: creation, lookup, the one-turn-at-a-time claim, a turn's end,
// expiry and the choice of a session to evict. Every lookup by id goes through one private
// function, so a rule that applies to every access (e.g. who may see a session) has one place.
#ifndef TEXTGEN_ENGINE_SCHEDULER_SESSION_STORE_H_
#define TEXTGEN_ENGINE_SCHEDULER_SESSION_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/decoding/generation.h"
#include "engine/kv_cache/block_table.h"
#include "engine/scheduler/session_journal.h"

namespace textgen {

// What a caller keeps with a session besides its tokens (e.g. a chat's messages), opaque to the
// engine, and the session's version: it grows by one whenever a turn ends with an answer.
struct SessionAttachment {
  std::string attachment;
  uint64_t version = 0;
};

// One conversation. `tokens`, `attachment`, `version`, `holder`, `deleted` and `last_used` are
// guarded by the SessionStore's mutex (read and written only through it); `table` and `lent`
// belong to the engine's scheduler thread.
struct Session {
  std::string id;
  std::string owner;  // the principal that created it ("" without authentication)
  std::vector<int32_t> tokens;
  std::string attachment;
  uint64_t version = 0;
  // The request taking this session's current turn (0: none). A cancel gives it up at once.
  uint64_t holder = 0;
  bool deleted = false;
  absl::Time created;
  absl::Time last_used;
  // The K/V of tokens[0, table.num_tokens).
  BlockTable table;
  // The table is with a running request (maybe a cancelled one, whose session is free again);
  // the next turn starts once it comes back.
  bool lent = false;
  // Shared journals: the store confirmed holding this session (a write of it succeeded, or it
  // came from the store). Only then does the store's having no record mean it was deleted or
  // expired elsewhere; an unconfirmed one (written while the store was unreachable) stays.
  bool stored = false;
};

// Thread-safe. With a journal, every change that must outlive the process is handed to it under
// the store's lock, so that the journal sees them in the order they happened: a creation, a
// committed turn (EndTurn), a deletion and an expiry.
//
// With a shared journal (several servers on one store, journal->shared()) this store is a cache
// of the shared one: every lookup by id from a request (Create with an id, Delete,
// GetAttachment, FindForTurn) first asks the journal for the record (Refresh) and takes it in
// when it is newer than the copy held here, so any server can continue any session (its K/V is
// recomputed from the tokens). A session that no request holds here and that the store no
// longer has is dropped. Expiry here then only frees memory: the shared store expires records
// itself (by their TTL), since another server may be using the session.
class SessionStore {
 public:
  // `journal` may be null (memory only); it must outlive the store.
  SessionStore(int max_sessions, absl::Duration ttl, SessionJournal* journal = nullptr)
      : max_sessions_(max_sessions), ttl_(ttl), journal_(journal) {}

  // At start, before any other call: the sessions a journal kept. Those unused for the TTL, with
  // a malformed id or a token outside [0, n_vocab) (a store written for another model) are
  // removed from the journal; beyond max_sessions the least recently used are.
  struct RestoreCounts {
    int restored = 0;
    int expired = 0;
    int dropped = 0;  // malformed, another model's, or beyond max_sessions
  };
  RestoreCounts Restore(std::vector<SessionRecord> records, int n_vocab, absl::Time now);

  // `requested_id` empty: a fresh unguessable id (128 random bits as 32 lowercase hex
  // characters). Otherwise that id, which must have the same form (InvalidArgument) and be
  // unused (AlreadyExists). ResourceExhausted at max_sessions. The session answers only to
  // `owner` below: for anyone else it is NotFound, the same as an unknown id, so ids cannot be
  // probed. With a journal it returns once the new session is durable (or the journal failed).
  absl::StatusOr<std::string> Create(const std::string& requested_id, const std::string& owner);
  // Removes the session; the scheduler frees its blocks (TakeGone). NotFound if unknown. With a
  // journal it returns once the removal is durable (or the journal failed and said so): a
  // deletion the client saw must not come back after a crash.
  absl::Status Delete(const std::string& id, const std::string& owner);
  // A copy. NotFound if unknown or expired.
  absl::StatusOr<SessionAttachment> GetAttachment(const std::string& id, const std::string& owner);

  // A session for a new turn, with a copy of its tokens and the version they are of: NotFound
  // if unknown or expired, FailedPrecondition if `version` is set and differs. `*busy`: another
  // request holds it right now (Claim would fail; the caller may wait for it to end).
  absl::StatusOr<std::shared_ptr<Session>> FindForTurn(const std::string& id,
                                                       const std::string& owner,
                                                       std::optional<uint64_t> version,
                                                       std::vector<int32_t>* tokens,
                                                       uint64_t* tokens_version, bool* busy);
  // Makes `request` the session's holder: FailedPrecondition if another request holds it or it
  // is no longer at `version` (a turn ended in between), NotFound if it was deleted.
  absl::Status Claim(Session& s, uint64_t request, std::optional<uint64_t> version);
  // Whether a request holds the session now.
  bool Held(const Session& s) const;
  // `request` gives the session up, if it still holds it (cancelled, or failed to start).
  void Release(Session& s, uint64_t request);

  struct TurnEnd {
    int valid_tokens = 0;    // leading conversation tokens a table kept by the turn may hold
    bool deleted = false;    // the session is gone: the caller frees the table
    bool journaled = false;  // the turn went to the journal: `durable` will run
  };
  // The end of `request`'s turn over `prompt` (the whole conversation it ran). If it still holds
  // the session and `result` is an answer (not cancelled), the conversation becomes the prompt
  // and the best hypothesis, the version grows and `attachment` (if set) replaces the
  // attachment, and (with a journal) the new record is written: `durable` runs once it is
  // durable or failed to be. Otherwise the conversation stays as it was and `durable` is
  // dropped. Releases the session.
  TurnEnd EndTurn(Session& s, uint64_t request, const std::vector<int32_t>& prompt,
                  int shared_prefix, const absl::StatusOr<GenerationResult>& result,
                  const std::function<std::string(const GenerationResult&)>& attachment,
                  SessionJournal::Done durable = nullptr);

  // Sessions deleted, or unused for the TTL, since the last call (the caller frees their
  // tables).
  std::vector<std::shared_ptr<Session>> TakeGone(absl::Time now);
  // Every session, deleted ones not yet taken included, removed from the store (shutdown).
  std::vector<std::shared_ptr<Session>> TakeAll();
  // The least recently used session without a holder whose `table` holds blocks, or nullptr.
  // Scheduler thread (it reads the tables).
  std::shared_ptr<Session> EvictionCandidate() const;
  // The blocks the eviction candidates hold together (scheduler thread).
  int EvictableBlocks() const;
  int size() const;

 private:
  // The one lookup by id: nullptr if unknown or owned by another principal.
  std::shared_ptr<Session> Find(const std::string& id, const std::string& owner) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CheckFree(const Session& s, std::optional<uint64_t> version) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // What the journal keeps of `s`.
  SessionRecord RecordOf(const Session& s) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A new session from a stored record, or nullptr if the record is malformed or of another
  // model (an id of the wrong form, a token outside the vocabulary).
  std::shared_ptr<Session> FromRecord(SessionRecord r) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Shared journals: the store's record of `id` replaces a stale copy held here, comes in if
  // none is, or (gone from the store) drops a confirmed copy no request holds. Outside mu_ (a
  // network round trip). An unreachable store changes nothing. ResourceExhausted when the
  // record cannot come in for max_sessions (every session held here is in use).
  absl::Status Refresh(const std::string& id);
  // Drops sessions_[id] from memory only (not from the journal); the scheduler frees its table.
  void Forget(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `done`, after marking the session `id` at `version` as stored when the write succeeded
  // (shared journals only; `done` itself otherwise).
  SessionJournal::Done ConfirmStored(const std::string& id, uint64_t version,
                                     SessionJournal::Done done);
  bool shared() const { return journal_ != nullptr && journal_->shared(); }

  const int max_sessions_;
  const absl::Duration ttl_;
  SessionJournal* const journal_;
  mutable absl::Mutex mu_;
  // Set by Restore: records with other tokens are another model's (0: not checked).
  int n_vocab_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  // Deleted sessions whose blocks the scheduler has yet to free.
  std::vector<std::shared_ptr<Session>> deleted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_SESSION_STORE_H_
