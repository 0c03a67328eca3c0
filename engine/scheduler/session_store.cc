#include "engine/scheduler/session_store.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(sessions_.size()) >= max_sessions_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("session limit reached (", max_sessions_, ")"));
  }
  std::string id = requested_id.empty() ? RandomSessionId() : requested_id;
  // Any owner's: ids are unique across principals (one that is taken says so only to a client
  // that already knows it).
  if (sessions_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("session ", id, " already exists"));
  }
  auto session = std::make_shared<Session>();
  session->id = id;
  session->owner = owner;
  session->last_used = absl::Now();
  sessions_[id] = std::move(session);
  return id;
}

absl::Status SessionStore::Delete(const std::string& id, const std::string& owner) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Session> s = Find(id, owner);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("unknown session ", id));
  s->deleted = true;
  sessions_.erase(id);
  deleted_.push_back(std::move(s));
  return absl::OkStatus();
}

absl::StatusOr<SessionAttachment> SessionStore::GetAttachment(const std::string& id,
                                                              const std::string& owner) const {
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
    std::vector<int32_t>* tokens, uint64_t* tokens_version, bool* busy) const {
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
    const std::function<std::string(const GenerationResult&)>& attachment) {
  absl::MutexLock lock(&mu_);
  TurnEnd end;
  // A cancelled turn changes nothing: its cancel already freed the session for the next turn,
  // which was built on the conversation as it was.
  const bool answered = result.ok() && !result->hypotheses.empty() &&
                        result->finish_reason != FinishReason::kCancelled;
  if (s.holder == request && answered) {
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
