// The SQLite session journal: records survive a reopen whole; every fault that must refuse a
// start (another server, a corrupted or too new database) does, naming the way out; those that
// must not (an unwritable directory, a full disk) degrade to memory only.
#include "state/sqlite_session_journal.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "tests/test_util.h"

namespace textgen::state {
namespace sqlite_session_journal_test {

namespace fs = std::filesystem;

SessionRecord Record(const std::string& id, uint64_t version, int n_tokens) {
  SessionRecord r;
  r.id = id;
  r.owner = "alice";
  for (int i = 0; i < n_tokens; ++i) r.tokens.push_back(i * 7 + 1);
  r.tokens.push_back(-5);  // any int32 comes back as it was
  r.attachment = std::string("[{\"role\":\"user\"}]\0binary", 25);
  r.version = version;
  r.created = absl::FromUnixMillis(1700000000123);
  r.last_used = absl::FromUnixMillis(1700000099456);
  r.ttl = absl::Seconds(600);
  return r;
}

std::unique_ptr<SqliteSessionJournal> MustOpen(const std::string& dir, bool reset = false,
                                               int64_t max_pages = 0) {
  SqliteJournalOptions o;
  o.dir = dir;
  o.reset = reset;
  o.max_pages = max_pages;
  auto j = SqliteSessionJournal::Open(o);
  INFO(j.status().ToString());
  REQUIRE(j.ok());
  return std::move(j).value();
}

absl::Status OpenStatus(const std::string& dir) {
  SqliteJournalOptions o;
  o.dir = dir;
  return SqliteSessionJournal::Open(o).status();
}

// Put or Remove, waiting for its answer.
absl::Status PutAndWait(SessionJournal& j, SessionRecord r) {
  absl::Notification done;
  absl::Status out;
  j.Put(std::move(r), [&](absl::Status st) {
    out = st;
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

absl::Status RemoveAndWait(SessionJournal& j, const std::string& id) {
  absl::Notification done;
  absl::Status out;
  j.Remove(id, [&](absl::Status st) {
    out = st;
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

void Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err != nullptr ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

TEST_CASE("journal records survive a reopen whole", "[state][journal]") {
  const std::string dir = testing::ScratchDir() + "/state";  // created by Open
  const std::string a(32, 'a'), b(32, 'b'), c(32, 'c');
  {
    auto j = MustOpen(dir);
    CHECK(!j->degraded());
    REQUIRE(j->LoadAll()->empty());
    CHECK(PutAndWait(*j, Record(a, 1, 5)).ok());
    CHECK(PutAndWait(*j, Record(b, 1, 3)).ok());
    CHECK(PutAndWait(*j, Record(a, 2, 9)).ok());  // replaces a's first record
    CHECK(RemoveAndWait(*j, b).ok());
    CHECK(RemoveAndWait(*j, c).ok());  // unknown: nothing to do
    // Unanswered changes are written by the destructor.
    j->Put(Record(c, 4, 1), nullptr);
  }
  auto j = MustOpen(dir);
  auto all = j->LoadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  std::sort(all->begin(), all->end(),
            [](const SessionRecord& x, const SessionRecord& y) { return x.id < y.id; });
  const SessionRecord want = Record(a, 2, 9);
  const SessionRecord& got = (*all)[0];
  CHECK(got.id == want.id);
  CHECK(got.owner == want.owner);
  CHECK(got.tokens == want.tokens);
  CHECK(got.attachment == want.attachment);
  CHECK(got.version == 2);
  CHECK(got.created == want.created);
  CHECK(got.last_used == want.last_used);
  CHECK(got.ttl == want.ttl);
  CHECK((*all)[1].id == c);
  CHECK((*all)[1].version == 4);
}

TEST_CASE("a second journal on the same directory is refused", "[state][journal]") {
  const std::string dir = testing::ScratchDir();
  {
    auto first = MustOpen(dir);
    absl::Status second = OpenStatus(dir);
    CHECK(absl::IsFailedPrecondition(second));
    CHECK_THAT(std::string(second.message()), Catch::Contains("sessions.lock") &&
                                                  Catch::Contains("another textgen-server") &&
                                                  Catch::Contains("--state-dir"));
  }
  // Released with the first.
  CHECK(OpenStatus(dir).ok());
}

TEST_CASE("a corrupted database is refused, and --state-reset moves it aside", "[state][journal]") {
  const std::string dir = testing::ScratchDir();
  const std::string path = dir + "/sessions.sqlite3";
  std::string garbage;
  for (int i = 0; i < 200; ++i) garbage += "this is not a database. ";
  testing::WriteFile(path, garbage);
  absl::Status st = OpenStatus(dir);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK_THAT(std::string(st.message()), Catch::Contains(path) && Catch::Contains("--state-reset"));
  CHECK(testing::ReadFile(path) == garbage);  // left as it was

  auto j = MustOpen(dir, /*reset=*/true);
  CHECK(j->LoadAll()->empty());
  CHECK(PutAndWait(*j, Record(std::string(32, 'a'), 1, 2)).ok());
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("sessions.sqlite3.broken-", 0) == 0) {
      ++aside;
      CHECK(testing::ReadFile(e.path().string()) == garbage);
    }
  }
  CHECK(aside == 1);
}

TEST_CASE("a database whose pages are damaged is refused", "[state][journal]") {
  const std::string dir = testing::ScratchDir();
  const std::string path = dir + "/sessions.sqlite3";
  {
    auto j = MustOpen(dir);
    for (int i = 0; i < 40; ++i) {
      std::string id = std::string(30, 'a') + std::to_string(10 + i);
      j->Put(Record(id, 1, 300), nullptr);
    }
    CHECK(PutAndWait(*j, Record(std::string(32, 'f'), 1, 1)).ok());
  }
  Sql(path, "PRAGMA wal_checkpoint(TRUNCATE)");
  // Overwrite the middle of the file (b-tree pages) with noise; the header stays valid.
  std::string bytes = testing::ReadFile(path);
  REQUIRE(bytes.size() > 3 * 4096);
  for (size_t i = 4096 + 100; i < bytes.size() - 4096; i += 7) bytes[i] = static_cast<char>(i);
  testing::WriteFile(path, bytes);
  absl::Status st = OpenStatus(dir);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK_THAT(std::string(st.message()), Catch::Contains(path) && Catch::Contains("--state-reset"));
}

TEST_CASE("a database with a newer schema is refused, an older one migrated", "[state][journal]") {
  const std::string dir = testing::ScratchDir();
  const std::string path = dir + "/sessions.sqlite3";
  Sql(path, "CREATE TABLE later (x INTEGER); PRAGMA user_version = 99;");
  absl::Status st = OpenStatus(dir);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK_THAT(std::string(st.message()), Catch::Contains("schema version 99") &&
                                            Catch::Contains("newer") && Catch::Contains(path) &&
                                            Catch::Contains("--state-reset"));

  // Version 0 with a table of someone else's: migrated to the current schema beside it.
  const std::string dir0 = testing::ScratchDir();
  Sql(dir0 + "/sessions.sqlite3", "CREATE TABLE notes (x INTEGER);");
  {
    auto j = MustOpen(dir0);
    CHECK(PutAndWait(*j, Record(std::string(32, 'a'), 1, 2)).ok());
  }
  auto j = MustOpen(dir0);
  CHECK(j->LoadAll()->size() == 1);
}

TEST_CASE("an unwritable state directory degrades to memory only", "[state][journal]") {
  // A path below a regular file: no process can create it, root included (tests may run as
  // root, for whom permission bits do not stop a write).
  const std::string file = testing::ScratchDir() + "/a-file";
  testing::WriteFile(file, "x");
  auto j = MustOpen(file + "/state");
  CHECK(j->degraded());
  auto all = j->LoadAll();
  REQUIRE(all.ok());
  CHECK(all->empty());
  absl::Status st = PutAndWait(*j, Record(std::string(32, 'a'), 1, 2));
  CHECK(absl::IsUnavailable(st));
  CHECK(absl::IsUnavailable(RemoveAndWait(*j, std::string(32, 'a'))));
}

TEST_CASE("a full disk degrades the journal and keeps the last whole record", "[state][journal]") {
  const std::string dir = testing::ScratchDir();
  const std::string a(32, 'a');
  {
    // As if the disk held a few pages only: a record of 100,000 tokens cannot be written.
    auto j = MustOpen(dir, false, /*max_pages=*/8);
    CHECK(PutAndWait(*j, Record(a, 1, 4)).ok());
    CHECK(!j->degraded());
    absl::Status st = PutAndWait(*j, Record(a, 2, 100000));
    CHECK(!st.ok());
    CHECK(j->degraded());
    // A small write succeeds again: no longer degraded (the large one, still pending, is
    // replaced by it).
    CHECK(PutAndWait(*j, Record(a, 3, 4)).ok());
    CHECK(!j->degraded());
    absl::Status again = PutAndWait(*j, Record(a, 4, 100000));
    CHECK(!again.ok());
  }
  // Never half a record: the last one written whole.
  auto j = MustOpen(dir);
  auto all = j->LoadAll();
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  CHECK((*all)[0].version == 3);
  CHECK((*all)[0].tokens == Record(a, 3, 4).tokens);
}

}  // namespace sqlite_session_journal_test
}  // namespace textgen::state
