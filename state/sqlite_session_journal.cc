#include "state/sqlite_session_journal.h"

#include <sqlite3.h>

#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace textgen::state {
namespace {

namespace fs = std::filesystem;

constexpr char kDbName[] = "sessions.sqlite3";
constexpr char kLockName[] = "sessions.lock";
// How long failed changes wait before they are written again (new changes try at once).
constexpr absl::Duration kRetry = absl::Seconds(2);

// Migrations: kSteps[v] takes a database from user_version v to v + 1, in the transaction that
// also sets the new user_version. A new layout appends a step and bumps kSchemaVersion.
constexpr const char* kSteps[] = {
    // 0 -> 1: the session records. tokens: int32 little-endian; times: Unix milliseconds.
    "CREATE TABLE sessions ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " owner TEXT NOT NULL,"
    " tokens BLOB NOT NULL,"
    " attachment BLOB NOT NULL,"
    " version INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL,"
    " last_used_ms INTEGER NOT NULL,"
    " ttl_ms INTEGER NOT NULL) WITHOUT ROWID",
};
static_assert(std::size(kSteps) == SqliteSessionJournal::kSchemaVersion);

bool IsCorrupt(int rc) {
  rc &= 0xff;  // the primary code of an extended one
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

std::string CorruptMessage(const std::string& path, const std::string& what) {
  return absl::StrCat(path, " is not a usable session database (", what,
                      "): start the server once with --state-reset to move it aside (to ", path,
                      ".broken-<time>) and begin with no sessions, or restore it from a backup");
}

// The error of `rc` on `db`: FailedPrecondition (a refusal) if the file is corrupted,
// Unavailable (degrade) otherwise.
absl::Status SqliteError(sqlite3* db, int rc, const std::string& path, const std::string& what) {
  const std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (IsCorrupt(rc)) return absl::FailedPreconditionError(CorruptMessage(path, msg));
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", msg));
}

// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  int prepare_rc() const { return rc_; }
  sqlite3_stmt* get() { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

int Exec(sqlite3* db, const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// The first column of the first row of `sql`, as text ("" if none); *rc the failure, if any.
std::string QueryText(sqlite3* db, const char* sql, int* rc) {
  Stmt st(db, sql);
  *rc = st.prepare_rc();
  if (*rc != SQLITE_OK) return "";
  *rc = sqlite3_step(st.get());
  if (*rc == SQLITE_DONE) {
    *rc = SQLITE_OK;
    return "";
  }
  if (*rc != SQLITE_ROW) return "";
  *rc = SQLITE_OK;
  const unsigned char* text = sqlite3_column_text(st.get(), 0);
  return text != nullptr ? reinterpret_cast<const char*>(text) : "";
}

// Renames `path` (and its WAL) to path.broken-<UTC time>; its shared-memory index is rebuilt.
absl::Status MoveAside(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::OkStatus();
  const std::string aside = absl::StrCat(
      path, ".broken-", absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()));
  fs::rename(path, aside, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state-reset: cannot move ", path, " aside: ", ec.message()));
  }
  if (fs::exists(path + "-wal", ec)) fs::rename(path + "-wal", aside + "-wal", ec);
  fs::remove(path + "-shm", ec);
  spdlog::warn("--state-reset: moved {} aside to {}; starting with no sessions", path, aside);
  return absl::OkStatus();
}

// Brings an open database to kSchemaVersion, or refuses a newer one.
absl::Status Migrate(sqlite3* db, const std::string& path) {
  int rc = SQLITE_OK;
  const std::string v = QueryText(db, "PRAGMA user_version", &rc);
  if (rc != SQLITE_OK) return SqliteError(db, rc, path, "cannot read the schema version of");
  const int version = std::atoi(v.c_str());
  if (version > SqliteSessionJournal::kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has session schema version ", version, ", newer than this textgen-server's (",
        SqliteSessionJournal::kSchemaVersion,
        "): a newer release wrote it. Run that release (or a later one), or start with "
        "--state-reset to move it aside (its sessions are then lost)"));
  }
  for (int step = version; step < SqliteSessionJournal::kSchemaVersion; ++step) {
    const std::string sql = absl::StrCat("BEGIN IMMEDIATE; ", kSteps[step],
                                         "; PRAGMA user_version = ", step + 1, "; COMMIT;");
    rc = Exec(db, sql.c_str());
    if (rc != SQLITE_OK) {
      absl::Status st = SqliteError(db, rc, path, "cannot migrate the schema of");
      Exec(db, "ROLLBACK");
      return st;
    }
    if (version > 0) spdlog::info("{}: session schema migrated to version {}", path, step + 1);
  }
  return absl::OkStatus();
}

// Opens `path` as a session database ready for writing; *db is set even on failure (close it).
absl::Status OpenDatabase(const std::string& path, const SqliteJournalOptions& o, sqlite3** db) {
  int rc =
      sqlite3_open_v2(path.c_str(), db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) return SqliteError(*db, rc, path, "cannot open");
  sqlite3_busy_timeout(*db, 5000);
  // The first read of the file: a file that is no database fails here.
  const std::string mode = QueryText(*db, "PRAGMA journal_mode=WAL", &rc);
  if (rc != SQLITE_OK) return SqliteError(*db, rc, path, "cannot open");
  if (mode != "wal") {
    return absl::UnavailableError(absl::StrCat("cannot use WAL mode on ", path, " (", mode, ")"));
  }
  const std::string check = QueryText(*db, "PRAGMA quick_check", &rc);
  if (rc != SQLITE_OK) return SqliteError(*db, rc, path, "cannot check");
  if (check != "ok") return absl::FailedPreconditionError(CorruptMessage(path, check));
  if (absl::Status st = Migrate(*db, path); !st.ok()) return st;
  rc = Exec(*db, o.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  if (rc != SQLITE_OK) return SqliteError(*db, rc, path, "cannot configure");
  if (o.max_pages > 0) {
    const std::string sql = absl::StrCat("PRAGMA max_page_count=", o.max_pages);
    QueryText(*db, sql.c_str(), &rc);
  }
  return absl::OkStatus();
}

std::string EncodeTokens(const std::vector<int32_t>& tokens) {
  std::string out(tokens.size() * 4, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<char>((t >> (8 * b)) & 0xff);
  }
  return out;
}

std::vector<int32_t> DecodeTokens(const unsigned char* p, size_t bytes) {
  std::vector<int32_t> tokens(bytes / 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    uint32_t t = 0;
    for (int b = 0; b < 4; ++b) t |= static_cast<uint32_t>(p[i * 4 + b]) << (8 * b);
    tokens[i] = static_cast<int32_t>(t);
  }
  return tokens;
}

std::string Column(sqlite3_stmt* st, int col) {
  const void* p = sqlite3_column_blob(st, col);
  return p != nullptr ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(st, col))
                      : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteSessionJournal>> SqliteSessionJournal::Open(
    const SqliteJournalOptions& options) {
  const std::string path = (fs::path(options.dir) / kDbName).string();
  auto degraded = [&path](const absl::Status& why) {
    spdlog::warn(
        "session state store unavailable, sessions are kept in memory only (lost on restart): "
        "{}",
        std::string(why.message()));
    return std::unique_ptr<SqliteSessionJournal>(
        new SqliteSessionJournal(path, nullptr, nullptr, std::string(why.message())));
  };
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    return degraded(absl::UnavailableError(
        absl::StrCat("cannot create --state-dir ", options.dir, ": ", ec.message())));
  }
  absl::StatusOr<std::unique_ptr<DirLock>> lock =
      DirLock::Acquire((fs::path(options.dir) / kLockName).string());
  if (!lock.ok()) {
    if (absl::IsFailedPrecondition(lock.status())) return lock.status();
    return degraded(lock.status());
  }
  if (options.reset) {
    if (absl::Status st = MoveAside(path); !st.ok()) return st;
  }
  sqlite3* db = nullptr;
  absl::Status st = OpenDatabase(path, options, &db);
  if (!st.ok()) {
    sqlite3_close_v2(db);
    if (absl::IsFailedPrecondition(st)) return st;
    return degraded(st);
  }
  spdlog::info("sessions are kept in {} (synchronous={})", path,
               options.sync_full ? "full" : "normal");
  return std::unique_ptr<SqliteSessionJournal>(
      new SqliteSessionJournal(path, *std::move(lock), db, ""));
}

SqliteSessionJournal::SqliteSessionJournal(std::string path, std::unique_ptr<DirLock> lock,
                                           sqlite3* db, std::string unavailable)
    : path_(std::move(path)),
      lock_(std::move(lock)),
      db_(db),
      unavailable_(std::move(unavailable)),
      degraded_(db == nullptr) {
  writer_ = std::thread([this] { WriterLoop(); });
}

SqliteSessionJournal::~SqliteSessionJournal() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::StatusOr<std::vector<SessionRecord>> SqliteSessionJournal::LoadAll() {
  std::vector<SessionRecord> out;
  if (db_ == nullptr) return out;
  Stmt st(db_,
          "SELECT id, owner, tokens, attachment, version, created_ms, last_used_ms, ttl_ms "
          "FROM sessions");
  if (st.prepare_rc() != SQLITE_OK) {
    return SqliteError(db_, st.prepare_rc(), path_, "cannot read the sessions of");
  }
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    SessionRecord r;
    r.id = Column(st.get(), 0);
    r.owner = Column(st.get(), 1);
    const int token_bytes = sqlite3_column_bytes(st.get(), 2);
    if (token_bytes % 4 != 0) {
      return absl::FailedPreconditionError(
          CorruptMessage(path_, absl::StrCat("session tokens of ", token_bytes, " bytes")));
    }
    const void* tokens = sqlite3_column_blob(st.get(), 2);
    if (tokens != nullptr) {
      r.tokens = DecodeTokens(static_cast<const unsigned char*>(tokens), token_bytes);
    }
    r.attachment = Column(st.get(), 3);
    r.version = static_cast<uint64_t>(sqlite3_column_int64(st.get(), 4));
    r.created = absl::FromUnixMillis(sqlite3_column_int64(st.get(), 5));
    r.last_used = absl::FromUnixMillis(sqlite3_column_int64(st.get(), 6));
    r.ttl = absl::Milliseconds(sqlite3_column_int64(st.get(), 7));
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, rc, path_, "cannot read the sessions of");
  return out;
}

void SqliteSessionJournal::Put(SessionRecord record, Done done) {
  const std::string id = record.id;
  Enqueue(id, std::move(record), std::move(done));
}

void SqliteSessionJournal::Remove(const std::string& id, Done done) {
  Enqueue(id, std::nullopt, std::move(done));
}

void SqliteSessionJournal::Enqueue(const std::string& id, std::optional<SessionRecord> record,
                                   Done done) {
  absl::MutexLock lock(&mu_);
  Change& c = pending_[id];
  c.record = std::move(record);
  if (done) c.done.push_back(std::move(done));
  fresh_ = true;
}

void SqliteSessionJournal::WriterLoop() {
  bool retrying = false;  // failed changes are pending
  while (true) {
    Batch batch;
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return fresh_ || stopping_; };
      if (retrying) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), kRetry);
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      stopping = stopping_;
      fresh_ = false;
      if (pending_.empty()) {
        if (stopping) return;
        continue;
      }
      batch.swap(pending_);
    }
    const absl::Status st = Write(batch);
    if (!st.ok() && !degraded_.exchange(true)) {
      spdlog::warn(
          "session state store failed, sessions are kept in memory only until it "
          "recovers: {}",
          std::string(st.message()));
    } else if (st.ok() && db_ != nullptr && degraded_.exchange(false)) {
      spdlog::info("session state store {} writable again", path_);
    }
    retrying = !st.ok() && db_ != nullptr;
    if (retrying) {
      // Kept for the next attempt, unless a newer change of the same id came meanwhile.
      absl::MutexLock lock(&mu_);
      for (auto& [id, change] : batch) {
        if (!pending_.contains(id)) pending_[id].record = change.record;
      }
    }
    for (auto& [id, change] : batch) {
      for (Done& d : change.done) d(st);
    }
    if (stopping && (retrying || db_ == nullptr)) {
      Batch lost;
      {
        absl::MutexLock lock(&mu_);
        lost.swap(pending_);
      }
      if (!lost.empty() && db_ != nullptr) {
        spdlog::warn("session state store: {} changes not written at shutdown", lost.size());
      }
      // Outside the lock, as above: a callback may take its caller's locks.
      for (auto& [id, change] : lost) {
        for (Done& d : change.done) d(st);
      }
      return;
    }
  }
}

absl::Status SqliteSessionJournal::Write(const Batch& batch) {
  if (db_ == nullptr) return absl::UnavailableError(unavailable_);
  int rc = Exec(db_, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) return SqliteError(db_, rc, path_, "cannot write");
  Stmt put(db_,
           "INSERT OR REPLACE INTO sessions (id, owner, tokens, attachment, version, created_ms, "
           "last_used_ms, ttl_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  Stmt del(db_, "DELETE FROM sessions WHERE id = ?1");
  rc = put.prepare_rc() != SQLITE_OK ? put.prepare_rc() : del.prepare_rc();
  for (auto it = batch.begin(); rc == SQLITE_OK && it != batch.end(); ++it) {
    const std::string& id = it->first;
    const std::optional<SessionRecord>& r = it->second.record;
    sqlite3_stmt* s = r.has_value() ? put.get() : del.get();
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    if (r.has_value()) {
      const std::string tokens = EncodeTokens(r->tokens);
      sqlite3_bind_text(s, 2, r->owner.data(), static_cast<int>(r->owner.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(s, 3, tokens.data(), static_cast<int>(tokens.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(s, 4, r->attachment.data(), static_cast<int>(r->attachment.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(s, 5, static_cast<int64_t>(r->version));
      sqlite3_bind_int64(s, 6, absl::ToUnixMillis(r->created));
      sqlite3_bind_int64(s, 7, absl::ToUnixMillis(r->last_used));
      sqlite3_bind_int64(s, 8, absl::ToInt64Milliseconds(r->ttl));
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  if (rc == SQLITE_OK) rc = Exec(db_, "COMMIT");
  if (rc == SQLITE_OK) return absl::OkStatus();
  absl::Status st = SqliteError(db_, rc, path_, "cannot write");
  // Nothing of a failed batch stays: the next attempt writes it whole.
  Exec(db_, "ROLLBACK");
  return st;
}

}  // namespace textgen::state
