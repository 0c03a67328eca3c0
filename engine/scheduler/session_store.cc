#include "engine/scheduler/session_store.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

bool IsSessionId(const std::string& id) {
  if (id.size() != 32) return false;
  for (char ch : id) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

std::string RandomSessionId() {
  // 128 bits from the OS entropy source: ids must not be guessable.
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrFormat("%08x", rd());
  return id;
}

absl::Status Unknown(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("unknown or expired session ", id));
}

absl::Status Changed(const std::string& id) {
  return absl::FailedPreconditionError(
      absl::StrCat("session ", id, " changed (another turn ended) since this turn was built"));
}

}  // namespace

SessionRecord SessionStore::RecordOf(const Session& s) const {
  return SessionRecord{s.id,      s.owner,   s.tokens,    s.attachment,
                       s.version, s.created, s.last_used, ttl_};
}

std::shared_ptr<Session> SessionStore::FromRecord(SessionRecord r) const {
  const int n_vocab = n_vocab_;
  auto in_vocab = [n_vocab](int32_t t) { return t >= 0 && (n_vocab == 0 || t < n_vocab); };
  if (!IsSessionId(r.id) || !std::all_of(r.tokens.begin(), r.tokens.end(), in_vocab)) {
    return nullptr;
  }
  auto session = std::make_shared<Session>();
  session->id = std::move(r.id);
  session->owner = std::move(r.owner);
  session->tokens = std::move(r.tokens);
  session->attachment = std::move(r.attachment);
  session->version = r.version;
  session->created = r.created;
  session->last_used = r.last_used;
  session->stored = true;
  return session;
}

SessionStore::RestoreCounts SessionStore::Restore(std::vector<SessionRecord> records, int n_vocab,
                                                  absl::Time now) {
  RestoreCounts counts;
  // Most recently used first: those beyond max_sessions are the ones to drop.
  std::sort(records.begin(), records.end(), [](const SessionRecord& a, const SessionRecord& b) {
    return a.last_used > b.last_used;
  });
  absl::MutexLock lock(&mu_);
  n_vocab_ = n_vocab;
  for (SessionRecord& r : records) {
    const bool expired = now - r.last_used > ttl_;
    const std::string id = r.id;
    std::shared_ptr<Session> session = sessions_.contains(id) ? nullptr : FromRecord(std::move(r));
    const bool valid = session != nullptr;
    if (!valid || expired || static_cast<int>(sessions_.size()) >= max_sessions_) {
      ++(expired && valid ? counts.expired : counts.dropped);
      if (journal_ != nullptr) journal_->Remove(id, nullptr);
      continue;
    }
    sessions_[id] = std::move(session);
    ++counts.restored;
  }
  return counts;
}

void SessionStore::Forget(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  it->second->deleted = true;
  deleted_.push_back(std::move(it->second));
  sessions_.erase(it);
}

absl::Status SessionStore::Refresh(const std::string& id) {
  if (!shared() || !IsSessionId(id)) return absl::OkStatus();
  absl::StatusOr<std::optional<SessionRecord>> got = journal_->Get(id);
  // Unreachable: go on with what is held here (the journal reports itself degraded).
  if (!got.ok()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  Session* held = it == sessions_.end() ? nullptr : it->second.get();
  // A turn running here: this copy is the newest there is (the turn has not ended anywhere).
  if (held != nullptr && held->holder != 0) return absl::OkStatus();
  if (!got->has_value()) {
    // Deleted or expired by the store; a copy it never confirmed is still being written.
    if (held != nullptr && held->stored) Forget(id);
    return absl::OkStatus();
  }
  if (held != nullptr && held->version >= (*got)->version) return absl::OkStatus();
  std::shared_ptr<Session> fresh = FromRecord(std::move(**got));
  if (fresh == nullptr) return absl::OkStatus();  // another model's record: not ours to serve
  if (held != nullptr) {
    Forget(id);
  } else if (static_cast<int>(sessions_.size()) >= max_sessions_) {
    // Room by dropping the least recently used copy the store holds and no request does.
    std::shared_ptr<Session> lru;
    for (const auto& [other, s] : sessions_) {
      if (s->holder != 0 || s->lent || !s->stored) continue;
      if (lru == nullptr || s->last_used < lru->last_used) lru = s;
    }
    if (lru == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("session limit reached (", max_sessions_, ") with every session in use"));
    }
    Forget(lru->id);
  }
  sessions_[id] = std::move(fresh);
  return absl::OkStatus();
}

SessionJournal::Done SessionStore::ConfirmStored(const std::string& id, uint64_t version,
                                                 SessionJournal::Done done) {
  if (!shared()) return done;
  // Runs on the journal's thread; the store outlives every write it started (Create and
  // Delete wait for theirs, the engine for its turns').
  return [this, id, version, done = std::move(done)](absl::Status status) {
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      auto it = sessions_.find(id);
      if (it != sessions_.end() && it->second->version == version) it->second->stored = true;
    }
    if (done) done(std::move(status));
  };
}

std::shared_ptr<Session> SessionStore::Find(const std::string& id, const std::string& owner) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner != owner) return nullptr;
  return it->second;
}

absl::StatusOr<std::string> SessionStore::Create(const std::string& requested_id,
                                                 const std::string& owner) {
  if (!requested_id.empty() && !IsSessionId(requested_id)) {
    return absl::InvalidArgumentError(
        "session_id must be 32 lowercase hex characters (128 random bits)");
  }
  // Another server's session of that id counts as taken.
  if (!requested_id.empty()) TG_RETURN_IF_ERROR(Refresh(requested_id));
  auto written = std::make_shared<absl::Notification>();
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(sessions_.size()) >= max_sessions_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("session limit reached (", max_sessions_, ")"));
    }
    id = requested_id.empty() ? RandomSessionId() : requested_id;
    // Any owner's: ids are unique across principals (one that is taken says so only to a client
    // that already knows it).
    if (sessions_.contains(id)) {
      return absl::AlreadyExistsError(absl::StrCat("session ", id, " already exists"));
    }
    auto session = std::make_shared<Session>();
    session->id = id;
    session->owner = owner;
    session->created = session->last_used = absl::Now();
    if (journal_ != nullptr) {
      journal_->Put(RecordOf(*session),
                    ConfirmStored(id, 0, [written](const absl::Status&) { written->Notify(); }));
    }
    sessions_[id] = std::move(session);
    if (journal_ == nullptr) return id;
  }
  // Outside the lock: a disk write. A session the client was given survives a crash (a failed
  // write is the journal's to report: it keeps it in memory).
  written->WaitForNotification();
  return id;
}

absl::Status SessionStore::Delete(const std::string& id, const std::string& owner) {
  TG_RETURN_IF_ERROR(Refresh(id));
  auto removed = std::make_shared<absl::Notification>();
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Session> s = Find(id, owner);
    if (s == nullptr) return absl::NotFoundError(absl::StrCat("unknown session ", id));
    s->deleted = true;
    sessions_.erase(id);
    deleted_.push_back(std::move(s));
    if (journal_ == nullptr) return absl::OkStatus();
    journal_->Remove(id, [removed](const absl::Status&) { removed->Notify(); });
  }
  // Outside the lock: a disk write. A failed one is the journal's to report (degraded); the
  // session is gone from this process either way.
  removed->WaitForNotification();
  return absl::OkStatus();
}

absl::StatusOr<SessionAttachment> SessionStore::GetAttachment(const std::string& id,
                                                              const std::string& owner) {
  TG_RETURN_IF_ERROR(Refresh(id));
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> s = Find(id, owner);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("unknown session ", id));
  return SessionAttachment{s->attachment, s->version};
}

absl::Status SessionStore::CheckFree(const Session& s, std::optional<uint64_t> version) const {
  if (s.deleted) return Unknown(s.id);
  if (s.holder != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("session ", s.id, " already has a request running"));
  }
  if (version.has_value() && *version != s.version) return Changed(s.id);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Session>> SessionStore::FindForTurn(
    const std::string& id, const std::string& owner, std::optional<uint64_t> version,
    std::vector<int32_t>* tokens, uint64_t* tokens_version, bool* busy) {
  TG_RETURN_IF_ERROR(Refresh(id));
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> s = Find(id, owner);
  if (s == nullptr) return Unknown(id);
  if (version.has_value() && *version != s->version) return Changed(id);
  *busy = s->holder != 0;
  *tokens = s->tokens;
  *tokens_version = s->version;
  return s;
}

bool SessionStore::Held(const Session& s) const {
  absl::MutexLock lock(&mu_);
  return s.holder != 0;
}

absl::Status SessionStore::Claim(Session& s, uint64_t request, std::optional<uint64_t> version) {
  absl::MutexLock lock(&mu_);
  if (absl::Status st = CheckFree(s, version); !st.ok()) return st;
  s.holder = request;
  s.last_used = absl::Now();
  return absl::OkStatus();
}

void SessionStore::Release(Session& s, uint64_t request) {
  absl::MutexLock lock(&mu_);
  if (s.holder != request) return;
  s.holder = 0;
  s.last_used = absl::Now();
}

SessionStore::TurnEnd SessionStore::EndTurn(
    Session& s, uint64_t request, const std::vector<int32_t>& prompt, int shared_prefix,
    const absl::StatusOr<GenerationResult>& result,
    const std::function<std::string(const GenerationResult&)>& attachment,
    SessionJournal::Done durable) {
  absl::MutexLock lock(&mu_);
  TurnEnd end;
  // A cancelled turn changes nothing: its cancel already freed the session for the next turn,
  // which was built on the conversation as it was.
  const bool answered = result.ok() && !result->hypotheses.empty() &&
                        result->finish_reason != FinishReason::kCancelled;
  const bool committed = s.holder == request && answered;
  if (committed) {
    // The conversation now holds the prompt and the best answer.
    s.tokens = prompt;
    const auto& ids = result->hypotheses[0].ids;
    s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
    ++s.version;
    if (attachment) s.attachment = attachment(*result);
    end.valid_tokens = static_cast<int>(s.tokens.size());
  } else {
    // Only the prompt tokens it shares with the conversation are valid.
    end.valid_tokens = std::min(shared_prefix, static_cast<int>(s.tokens.size()));
  }
  if (s.holder == request) s.holder = 0;
  s.last_used = absl::Now();
  end.deleted = s.deleted;
  // Under the lock: a Delete after this point queues its removal after this record.
  if (committed && !s.deleted && journal_ != nullptr) {
    journal_->Put(RecordOf(s), ConfirmStored(s.id, s.version, std::move(durable)));
    end.journaled = true;
  }
  return end;
}

std::vector<std::shared_ptr<Session>> SessionStore::TakeGone(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> gone;
  gone.swap(deleted_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto current = it++;
    Session& s = *current->second;
    if (s.holder == 0 && now - s.last_used > ttl_) {
      s.deleted = true;
      // A shared store expires records by itself: another server may be using this one.
      if (journal_ != nullptr && !journal_->shared()) journal_->Remove(s.id, nullptr);
      gone.push_back(std::move(current->second));
      sessions_.erase(current);
    }
  }
  return gone;
}

std::vector<std::shared_ptr<Session>> SessionStore::TakeAll() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> all;
  all.swap(deleted_);
  for (auto& [id, s] : sessions_) {
    s->deleted = true;
    all.push_back(std::move(s));
  }
  sessions_.clear();
  return all;
}

std::shared_ptr<Session> SessionStore::EvictionCandidate() const {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> victim;
  for (const auto& [id, s] : sessions_) {
    if (s->holder != 0 || s->table.empty()) continue;
    if (victim == nullptr || s->last_used < victim->last_used) victim = s;
  }
  return victim;
}

int SessionStore::EvictableBlocks() const {
  absl::MutexLock lock(&mu_);
  int blocks = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->holder == 0) blocks += s->table.num_blocks();
  }
  return blocks;
}

int SessionStore::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

}  // namespace textgen
