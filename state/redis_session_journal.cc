#include "state/redis_session_journal.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "state/redis_connection.h"

namespace textgen::state {
namespace {

// Reconnection after an outage: the first attempt soon, then less and less often.
constexpr absl::Duration kFirstRetry = absl::Milliseconds(200);
constexpr absl::Duration kMaxRetry = absl::Seconds(5);

// Every write: a compare-and-set, atomic on the server.
// KEYS[1]: the session's key. ARGV[1]: 'put', 'remove' or 'remove+put' (a Remove and a Put of
// the same id coalesced); [2] the layout (kFormat); [3] the tombstone's TTL in ms; [4] now, Unix
// microseconds; puts: [5] the version (decimal), [6] the record's TTL in ms (0: none), then
// field, value, ... Returns 1 when written, 0 when a put is refused; an error starting with
// TEXTGEN when the key holds anything but a record of this layout (it is left as it is).
constexpr char kScript[] = R"lua(
local key, mode, format = KEYS[1], ARGV[1], ARGV[2]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'none' then
  if kind ~= 'hash' then
    return redis.error_reply('TEXTGEN holds a ' .. kind .. ', not a session record')
  end
  local stored = redis.call('HGET', key, 'format')
  if not stored then
    return redis.error_reply('TEXTGEN holds a hash that is not a session record (no format field)')
  end
  if stored ~= format then
    return redis.error_reply('TEXTGEN holds a session record of format ' .. stored ..
                             ', this server writes format ' .. format)
  end
end
-- Each branch writes with HSET first: Redis refuses a script's first write when it is out of
-- memory (maxmemory), as it would refuse the plain command, but lets any write after one through.
if mode ~= 'put' then
  redis.call('HSET', key, 'format', format, 'removed_us', ARGV[4])
  redis.call('HDEL', key, 'owner', 'tokens', 'attachment', 'version', 'created_us',
             'last_used_us', 'ttl_us')
  redis.call('PEXPIRE', key, ARGV[3])
  if mode == 'remove' then return 1 end
end
local version = ARGV[5]
local held = redis.call('HMGET', key, 'version', 'removed_us')
if held[2] then
  -- Removed: only a creation may take the id again.
  if version ~= '0' then return 0 end
elseif held[1] then
  -- Decimal strings without leading zeros, compared exactly (Lua's numbers end at 2^53).
  if #version < #held[1] or (#version == #held[1] and version <= held[1]) then return 0 end
end
redis.call('HSET', key, 'format', format, 'version', version, unpack(ARGV, 7))
redis.call('HDEL', key, 'removed_us')
if ARGV[6] ~= '0' then
  redis.call('PEXPIRE', key, ARGV[6])
else
  redis.call('PERSIST', key)
end
return 1
)lua";

std::string Key(const std::string& id) { return absl::StrCat(RedisSessionJournal::kKeyPrefix, id); }

// What logs and messages may show of a session id: a full one would let a reader of the logs
// continue someone's conversation.
std::string ShortId(const std::string& id) {
  return id.size() <= 8 ? id : absl::StrCat(id.substr(0, 8), "...");
}
std::string ShortKey(const std::string& id) {
  return absl::StrCat(RedisSessionJournal::kKeyPrefix, ShortId(id));
}

std::string EncodeTokens(const std::vector<int32_t>& tokens) {
  std::string out(tokens.size() * 4, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<char>((t >> (8 * b)) & 0xff);
  }
  return out;
}

std::vector<int32_t> DecodeTokens(absl::string_view bytes) {
  std::vector<int32_t> tokens(bytes.size() / 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    uint32_t t = 0;
    for (int b = 0; b < 4; ++b) {
      t |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i * 4 + b])) << (8 * b);
    }
    tokens[i] = static_cast<int32_t>(t);
  }
  return tokens;
}

// Milliseconds for PEXPIRE: at least 1 (0 would delete the key at once), at most a century
// (Redis refuses an expiry time past 2^63 ms, and a script stopped by that error would have
// written half its change).
std::string ExpiryMs(absl::Duration d) {
  d = std::min(d, absl::Hours(24 * 365 * 100));
  return absl::StrCat(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)))));
}

// The script's KEYS and ARGV for one change.
std::vector<std::string> ScriptArgs(const std::string& id, const std::optional<SessionRecord>& r,
                                    bool remove_first, absl::Duration tombstone_ttl) {
  const char* mode = !r.has_value() ? "remove" : remove_first ? "remove+put" : "put";
  std::vector<std::string> a = {"1",
                                Key(id),
                                mode,
                                RedisSessionJournal::kFormat,
                                ExpiryMs(tombstone_ttl),
                                absl::StrCat(absl::ToUnixMicros(absl::Now()))};
  if (!r.has_value()) return a;
  a.push_back(absl::StrCat(r->version));
  a.push_back(r->ttl > absl::ZeroDuration() ? ExpiryMs(r->ttl) : "0");
  for (std::string s : {std::string("owner"), r->owner, std::string("tokens"),
                        EncodeTokens(r->tokens), std::string("attachment"), r->attachment,
                        std::string("created_us"), absl::StrCat(absl::ToUnixMicros(r->created)),
                        std::string("last_used_us"), absl::StrCat(absl::ToUnixMicros(r->last_used)),
                        std::string("ttl_us"), absl::StrCat(absl::ToInt64Microseconds(r->ttl))}) {
    a.push_back(std::move(s));
  }
  return a;
}

// EVALSHA sha, or EVAL with the script's text, then `args`.
std::vector<std::string_view> Eval(const std::string& sha, const std::vector<std::string>& args) {
  std::vector<std::string_view> cmd;
  cmd.reserve(args.size() + 2);
  cmd.push_back(sha.empty() ? "EVAL" : "EVALSHA");
  cmd.push_back(sha.empty() ? std::string_view(kScript) : std::string_view(sha));
  for (const std::string& s : args) cmd.push_back(s);
  return cmd;
}

absl::string_view ErrorText(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR ? absl::string_view(r.str, r.len) : absl::string_view();
}

// A newer `newer` change of an id whose `older` one is not written yet: a removal in the older
// must still happen before the newer's put.
void Merge(const std::optional<SessionRecord>& older_record, bool older_remove_first,
           bool newer_is_put, bool* newer_remove_first) {
  if (newer_is_put && (!older_record.has_value() || older_remove_first)) {
    *newer_remove_first = true;
  }
}

// The fields of an HGETALL reply, or why it is not a session record.
absl::StatusOr<std::optional<SessionRecord>> ParseRecord(const std::string& address,
                                                         const std::string& id,
                                                         const redisReply& reply) {
  const std::string where = absl::StrCat("session store redis ", address, ": key ", ShortKey(id));
  auto foreign = [&where](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(where, " ", std::string(what)));
  };
  if (const absl::string_view error = ErrorText(reply); !error.empty()) {
    if (absl::StartsWith(error, "WRONGTYPE")) {
      return foreign("holds a value of another type, not a session record");
    }
    if (absl::StartsWith(error, "LOADING") || absl::StartsWith(error, "BUSY")) {
      return absl::UnavailableError(absl::StrCat(where, ": ", std::string(error)));
    }
    return foreign(absl::StrCat("cannot be read: ", std::string(error)));
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements % 2 != 0) {
    return foreign("gave a reply that is not a hash's fields");
  }
  absl::flat_hash_map<absl::string_view, absl::string_view> f;
  for (size_t i = 0; i < reply.elements; i += 2) {
    const redisReply* k = reply.element[i];
    const redisReply* v = reply.element[i + 1];
    if (k == nullptr || v == nullptr || k->type != REDIS_REPLY_STRING ||
        v->type != REDIS_REPLY_STRING) {
      return foreign("gave a reply that is not a hash's fields");
    }
    f[absl::string_view(k->str, k->len)] = absl::string_view(v->str, v->len);
  }
  if (f.empty()) return std::nullopt;
  auto format = f.find("format");
  if (format == f.end()) return foreign("holds a hash that is not a session record (no format)");
  if (format->second != RedisSessionJournal::kFormat) {
    return foreign(absl::StrCat("holds a session record of format ", std::string(format->second),
                                ", this server reads format ", RedisSessionJournal::kFormat));
  }
  if (f.contains("removed_us")) return std::nullopt;  // a tombstone
  std::string missing;
  auto text = [&](absl::string_view name) -> absl::string_view {
    auto it = f.find(name);
    if (it != f.end()) return it->second;
    if (missing.empty()) missing = std::string(name);
    return {};
  };
  auto integer = [&](absl::string_view name, auto* out) {
    const absl::string_view s = text(name);
    if (!s.empty() && !absl::SimpleAtoi(s, out) && missing.empty()) missing = std::string(name);
  };
  SessionRecord r;
  r.id = id;
  r.owner = std::string(text("owner"));
  const absl::string_view tokens = text("tokens");
  r.attachment = std::string(text("attachment"));
  int64_t created = 0, last_used = 0, ttl = 0;
  integer("version", &r.version);
  integer("created_us", &created);
  integer("last_used_us", &last_used);
  integer("ttl_us", &ttl);
  for (const char* required : {"version", "created_us", "last_used_us", "ttl_us"}) {
    if (text(required).empty() && missing.empty()) missing = required;
  }
  if (!missing.empty()) return foreign(absl::StrCat("has no valid field ", missing));
  if (tokens.size() % 4 != 0) {
    return foreign(absl::StrCat("has tokens of ", tokens.size(), " bytes (not 4 per token)"));
  }
  r.tokens = DecodeTokens(tokens);
  r.created = absl::FromUnixMicros(created);
  r.last_used = absl::FromUnixMicros(last_used);
  r.ttl = absl::Microseconds(ttl);
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisSessionJournal>> RedisSessionJournal::Open(
    const RedisJournalOptions& options) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(options.url);
  if (!url.ok()) return url.status();
  if (options.timeout <= absl::ZeroDuration() || options.tombstone_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "session store: the Redis timeout and tombstone TTL must be positive");
  }
  const std::string address = url->address();
  absl::StatusOr<std::unique_ptr<RedisConnection>> conn =
      RedisConnection::Connect(*url, options.timeout);
  std::string outage;
  if (!conn.ok()) {
    if (!absl::IsUnavailable(conn.status())) return conn.status();
    outage = std::string(conn.status().message());
    spdlog::warn(
        "session store redis {} unreachable, sessions are kept in memory only until it is "
        "reachable (retrying in the background): {}",
        address, outage);
  }
  std::unique_ptr<RedisSessionJournal> j(new RedisSessionJournal(
      options, *std::move(url), conn.ok() ? *std::move(conn) : nullptr, outage));
  if (j->writer_conn_ != nullptr) {
    // A server that refuses scripts (disabled, an ACL) can never take a write.
    if (absl::Status st = j->LoadScript(); !st.ok()) {
      if (!absl::IsUnavailable(st)) return st;
      j->writer_conn_.reset();
      j->degraded_ = true;
      absl::MutexLock lock(&j->mu_);
      j->outage_ = std::string(st.message());
      spdlog::warn("session store redis {} unreachable (retrying in the background): {}", address,
                   std::string(st.message()));
    } else {
      spdlog::info("sessions are kept in redis {}", address);
    }
  }
  j->writer_ = std::thread([p = j.get()] { p->WriterLoop(); });
  j->answerer_ = std::thread([p = j.get()] { p->AnswerLoop(); });
  return j;
}

RedisSessionJournal::RedisSessionJournal(const RedisJournalOptions& options, RedisUrl url,
                                         std::unique_ptr<RedisConnection> writer_conn,
                                         std::string outage)
    : url_(std::move(url)),
      address_(url_.address()),
      timeout_(options.timeout),
      tombstone_ttl_(options.tombstone_ttl),
      degraded_(writer_conn == nullptr),
      outage_(std::move(outage)),
      writer_conn_(std::move(writer_conn)) {}

RedisSessionJournal::~RedisSessionJournal() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
  if (answerer_.joinable()) answerer_.join();
}

absl::StatusOr<std::vector<SessionRecord>> RedisSessionJournal::LoadAll() {
  return std::vector<SessionRecord>();
}

void RedisSessionJournal::Put(SessionRecord record, Done done) {
  const std::string id = record.id;
  Enqueue(id, std::move(record), std::move(done));
}

void RedisSessionJournal::Remove(const std::string& id, Done done) {
  Enqueue(id, std::nullopt, std::move(done));
}

void RedisSessionJournal::Enqueue(const std::string& id, std::optional<SessionRecord> record,
                                  Done done) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = pending_.try_emplace(id);
  Change& c = it->second;
  bool remove_first = false;
  if (!inserted) Merge(c.record, c.remove_first, record.has_value(), &remove_first);
  c.record = std::move(record);
  c.remove_first = remove_first;
  if (done) {
    if (degraded_) {
      answers_.emplace_back(std::move(done), OutageStatus());
    } else {
      c.done.push_back(std::move(done));
    }
  }
  fresh_ = true;
}

absl::Status RedisSessionJournal::OutageStatus() const {
  return absl::UnavailableError(absl::StrCat(
      "session store unavailable, the change is kept in memory and written when it is back: ",
      outage_));
}

void RedisSessionJournal::Degrade(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    outage_ = std::string(why.message());
  }
  if (!degraded_.exchange(true)) {
    spdlog::warn(
        "session store redis {} failed, sessions are kept in memory only until it is back "
        "(retrying): {}",
        address_, std::string(why.message()));
  }
}

void RedisSessionJournal::MarkUnreachable(const absl::Status& why) {
  Degrade(why);
  absl::MutexLock lock(&mu_);
  probe_ = true;
}

void RedisSessionJournal::AnswerLoop() {
  while (true) {
    std::vector<std::pair<Done, absl::Status>> answers;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !answers_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (answers_.empty()) return;  // stopping, and nothing left
      answers.swap(answers_);
    }
    // Outside the lock: a callback may take its caller's locks, or call Put.
    for (auto& [done, status] : answers) done(status);
  }
}

absl::Status RedisSessionJournal::LoadScript() {
  absl::StatusOr<RedisConnection::Reply> reply = writer_conn_->Command({"SCRIPT", "LOAD", kScript});
  if (!reply.ok()) return reply.status();
  const redisReply& r = **reply;
  if (r.type == REDIS_REPLY_STRING) {
    script_sha_.assign(r.str, r.len);
    return absl::OkStatus();
  }
  const std::string error(ErrorText(r));
  if (absl::StartsWith(error, "LOADING") || absl::StartsWith(error, "BUSY")) {
    return absl::UnavailableError(absl::StrCat("redis ", address_, ": ", error));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "redis ", address_, " refused the session store's script (SCRIPT LOAD): ", error));
}

absl::Status RedisSessionJournal::Attempt(Batch& batch) {
  bool may_retry = true;
  while (true) {
    const bool reused = writer_conn_ != nullptr && !writer_conn_->broken();
    if (!reused) {
      writer_conn_.reset();
      absl::StatusOr<std::unique_ptr<RedisConnection>> conn =
          RedisConnection::Connect(url_, timeout_);
      if (!conn.ok()) return conn.status();
      writer_conn_ = *std::move(conn);
      script_sha_.clear();
    }
    absl::Status st = script_sha_.empty() ? LoadScript() : absl::OkStatus();
    if (st.ok()) st = batch.empty() ? Ping() : WriteBatch(batch);
    // A connection kept from before may have been closed meanwhile (a restarted server, one
    // that drops idle clients): one more try on a new one before calling Redis unreachable.
    // Not after a timeout: that would only wait again.
    const bool retry =
        !st.ok() && reused && may_retry && writer_conn_->broken() && !writer_conn_->timed_out();
    if (!retry) return st;
    may_retry = false;
  }
}

absl::Status RedisSessionJournal::Ping() {
  // Nothing to write: is Redis back (a Get found it gone)?
  absl::StatusOr<RedisConnection::Reply> pong = writer_conn_->Command({"PING"});
  if (!pong.ok()) return pong.status();
  const absl::string_view error = ErrorText(**pong);
  if (!error.empty()) {
    return absl::UnavailableError(absl::StrCat("redis ", address_, ": ", std::string(error)));
  }
  return absl::OkStatus();
}

absl::Status RedisSessionJournal::WriteBatch(Batch& batch) {
  // One pipeline: every change sent, then every reply read.
  std::vector<std::string> ids;
  std::vector<std::vector<std::string>> args;
  for (const auto& [id, c] : batch) {
    ids.push_back(id);
    args.push_back(ScriptArgs(id, c.record, c.remove_first, tombstone_ttl_));
    if (absl::Status st = writer_conn_->Append(Eval(script_sha_, args.back())); !st.ok()) {
      return st;
    }
  }
  absl::Status status;
  std::vector<RedisConnection::Reply> replies;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<RedisConnection::Reply> r = writer_conn_->Read();
    if (!r.ok()) {
      status = r.status();  // the rest stay pending: each is safe to send again
      break;
    }
    replies.push_back(*std::move(r));
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    // Redis lost its scripts (a restart, SCRIPT FLUSH): the text again, which it keeps.
    if (absl::StartsWith(ErrorText(*replies[i]), "NOSCRIPT")) {
      absl::StatusOr<RedisConnection::Reply> r = writer_conn_->Command(Eval("", args[i]));
      if (!r.ok()) {
        status = r.status();
        replies.resize(i);
        break;
      }
      replies[i] = *std::move(r);
    }
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    const redisReply& r = *replies[i];
    const absl::string_view error = ErrorText(r);
    absl::Status outcome;
    if (r.type == REDIS_REPLY_INTEGER) {
      if (r.integer == 0) {
        spdlog::debug("session store: a stale change of session {} refused", ShortId(ids[i]));
      }
    } else if (absl::StartsWith(error, "TEXTGEN") || absl::StartsWith(error, "WRONGTYPE")) {
      // Someone else's key, or a newer layout: left alone, and this change dropped.
      const absl::string_view what = absl::StartsWith(error, "TEXTGEN ")
                                         ? error.substr(8)
                                         : absl::string_view("holds a value of another type");
      outcome = absl::FailedPreconditionError(
          absl::StrCat("session store redis ", address_, ": key ", ShortKey(ids[i]), " ",
                       std::string(what), "; the change of this session is not written"));
      spdlog::warn("{}", std::string(outcome.message()));
    } else if (!error.empty()) {
      // Out of memory, a read-only replica, a busy script: Redis may take it later.
      if (status.ok()) {
        status = absl::UnavailableError(
            absl::StrCat("redis ", address_, " refused a write: ", std::string(error)));
      }
      continue;
    } else {
      outcome = absl::FailedPreconditionError(absl::StrCat(
          "session store redis ", address_, ": an unexpected reply (type ", r.type,
          ") to the write of session ", ShortId(ids[i]), "; the change is not written"));
      spdlog::warn("{}", std::string(outcome.message()));
    }
    auto it = batch.find(ids[i]);
    for (Done& d : it->second.done) d(outcome);
    batch.erase(it);
  }
  return status;
}

void RedisSessionJournal::WriterLoop() {
  absl::Duration backoff = kFirstRetry;
  absl::Time retry_at = degraded_ ? absl::Now() + backoff : absl::InfiniteFuture();
  while (true) {
    Batch batch;
    bool stopping, due;
    std::vector<Done> early;  // changes that came while degraded: answered now
    absl::Status outage;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return fresh_ || probe_ || stopping_; };
      mu_.AwaitWithDeadline(absl::Condition(&ready), retry_at);
      stopping = stopping_;
      if (probe_ && retry_at == absl::InfiniteFuture()) retry_at = absl::Now() + backoff;
      probe_ = false;
      // Healthy again meanwhile (a Get's outage, ended by a write): no probe due.
      if (!degraded_) retry_at = absl::InfiniteFuture();
      fresh_ = false;
      if (degraded_) {
        for (auto& [id, c] : pending_) {
          for (Done& d : c.done) early.push_back(std::move(d));
          c.done.clear();
        }
        outage = OutageStatus();
      }
      // While degraded, only the reconnection schedule writes (or probes, with nothing
      // pending); at stop, one last attempt of what is pending.
      if (stopping) {
        due = !pending_.empty();
      } else if (degraded_) {
        due = absl::Now() >= retry_at;
      } else {
        due = !pending_.empty();
      }
      if (due) batch.swap(pending_);
    }
    // Outside the lock: a callback may take its caller's locks, or call Put.
    for (Done& d : early) d(outage);
    if (!due) {
      if (stopping) return;
      continue;
    }
    const size_t attempted = batch.size();
    const absl::Status st = Attempt(batch);
    if (st.ok()) {
      backoff = kFirstRetry;
      retry_at = absl::InfiniteFuture();
      if (degraded_.exchange(false)) {
        spdlog::info("session store redis {} is back; {} pending session changes written", address_,
                     attempted);
      }
      continue;  // at stop too: what came meanwhile, then return
    }
    Degrade(st);
    std::vector<Done> failed;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, c] : batch) {
        for (Done& d : c.done) failed.push_back(std::move(d));
        // Kept for the next attempt, unless a newer change of the same id came meanwhile.
        auto [it, inserted] = pending_.try_emplace(id);
        if (inserted) {
          it->second.record = std::move(c.record);
          it->second.remove_first = c.remove_first;
        } else {
          Merge(c.record, c.remove_first, it->second.record.has_value(), &it->second.remove_first);
        }
      }
      // Those that came during the attempt, before it failed.
      for (auto& [id, c] : pending_) {
        for (Done& d : c.done) failed.push_back(std::move(d));
        c.done.clear();
      }
      outage = OutageStatus();
      if (stopping && !pending_.empty()) {
        spdlog::warn("session store redis {}: {} session changes not written at shutdown", address_,
                     pending_.size());
      }
    }
    for (Done& d : failed) d(outage);
    if (stopping) return;
    retry_at = absl::Now() + backoff;
    backoff = std::min(backoff * 2, kMaxRetry);
  }
}

absl::StatusOr<std::optional<SessionRecord>> RedisSessionJournal::Get(const std::string& id) {
  auto unreachable = [this]() {
    absl::MutexLock lock(&mu_);
    return absl::UnavailableError(absl::StrCat("session store unavailable: ", outage_));
  };
  if (degraded_) return unreachable();
  absl::MutexLock lock(&get_mu_);
  if (degraded_) return unreachable();  // found so while this call waited for the connection
  bool may_retry = true;
  while (true) {
    const bool reused = get_conn_ != nullptr && !get_conn_->broken();
    if (!reused) {
      get_conn_.reset();
      absl::StatusOr<std::unique_ptr<RedisConnection>> conn =
          RedisConnection::Connect(url_, timeout_);
      if (!conn.ok()) {
        MarkUnreachable(conn.status());
        return unreachable();
      }
      get_conn_ = *std::move(conn);
    }
    absl::StatusOr<RedisConnection::Reply> reply = get_conn_->Command({"HGETALL", Key(id)});
    if (reply.ok()) return ParseRecord(address_, id, **reply);
    // As the writer's: a connection closed while it was idle gets one more try.
    if (reused && may_retry && !get_conn_->timed_out()) {
      may_retry = false;
      continue;
    }
    get_conn_.reset();
    MarkUnreachable(reply.status());
    return unreachable();
  }
}

}  // namespace textgen::state
