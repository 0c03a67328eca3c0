// The Redis session journal against a real redis-server (tests/support/redis_server.h): records
// come back whole, a stale or late write never wins (compare-and-set, tombstones), keys expire,
// and Redis being down, hung, killed or full of someone else's keys never crashes it nor makes a
// caller wait: it degrades, answers at once, and writes what is pending once Redis is back.
#include "state/redis_session_journal.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/support/redis_server.h"
#include "tests/support/server_process.h"

namespace textgen::state {
namespace redis_session_journal_test {

using testing::RedisServer;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A session id as SessionStore makes them: 32 hex characters.
std::string Id(int n) {
  std::string hex = std::to_string(n);
  return std::string(32 - hex.size(), 'a') + hex;
}

SessionRecord Record(const std::string& id, uint64_t version, int n_tokens = 3) {
  SessionRecord r;
  r.id = id;
  r.owner = "alice";
  for (int i = 0; i < n_tokens; ++i) r.tokens.push_back(static_cast<int32_t>(version * 100 + i));
  r.attachment = "turn " + std::to_string(version);
  r.version = version;
  r.created = absl::FromUnixMicros(1700000000123456);
  r.last_used = absl::FromUnixMicros(1700000099654321);
  r.ttl = absl::Seconds(600);
  return r;
}

std::unique_ptr<RedisSessionJournal> MustOpen(const std::string& url,
                                              absl::Duration timeout = absl::Milliseconds(500),
                                              absl::Duration tombstone_ttl = absl::Hours(1)) {
  RedisJournalOptions o;
  o.url = url;
  o.timeout = timeout;
  o.tombstone_ttl = tombstone_ttl;
  auto j = RedisSessionJournal::Open(o);
  INFO(j.status().ToString());
  REQUIRE(j.ok());
  return std::move(j).value();
}

// Put or Remove, waiting for its answer (which must come on another thread).
absl::Status Wait(const std::function<void(SessionJournal::Done)>& call) {
  absl::Notification done;
  absl::Status out;
  std::thread::id answered_on;
  call([&](absl::Status st) {
    out = st;
    answered_on = std::this_thread::get_id();
    done.Notify();
  });
  REQUIRE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  CHECK(answered_on != std::this_thread::get_id());
  return out;
}
absl::Status PutAndWait(SessionJournal& j, SessionRecord r) {
  return Wait([&](SessionJournal::Done d) { j.Put(std::move(r), std::move(d)); });
}
absl::Status RemoveAndWait(SessionJournal& j, const std::string& id) {
  return Wait([&](SessionJournal::Done d) { j.Remove(id, std::move(d)); });
}

// The record Get returns; FAILs unless Get succeeds and finds one.
SessionRecord MustGet(SessionJournal& j, const std::string& id) {
  auto got = j.Get(id);
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  return **got;
}
bool Absent(SessionJournal& j, const std::string& id) {
  auto got = j.Get(id);
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  return !got->has_value();
}

// Polls `done` for up to `seconds`; true once it holds.
bool Eventually(const std::function<bool()>& done, double seconds = 15) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// A plain hiredis client, to look at and to spoil what the journal wrote.
class Raw {
 public:
  explicit Raw(int port, int db = 0) {
    c_ = redisConnect("127.0.0.1", port);
    REQUIRE(c_ != nullptr);
    REQUIRE(c_->err == 0);
    CHECK(Status({"SELECT", std::to_string(db)}) == "OK");
  }
  ~Raw() { redisFree(c_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  struct Free {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  std::unique_ptr<redisReply, Free> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data()));
    REQUIRE(r != nullptr);
    return std::unique_ptr<redisReply, Free>(r);
  }
  // A string, status or error reply's text; "(nil)" for nil.
  std::string Status(const std::vector<std::string>& args) {
    auto r = Command(args);
    if (r->type == REDIS_REPLY_NIL) return "(nil)";
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return std::string(r->str, r->len);
  }
  long long Integer(const std::vector<std::string>& args) {
    auto r = Command(args);
    REQUIRE(r->type == REDIS_REPLY_INTEGER);
    return r->integer;
  }

 private:
  redisContext* c_ = nullptr;
};

std::string Key(const std::string& id) { return RedisSessionJournal::kKeyPrefix + id; }

// Everything spdlog writes while it lives (read it once the journal is gone).
class LogCapture {
 public:
  LogCapture() : old_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(old_); }
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> old_;
  std::ostringstream out_;
};

TEST_CASE("redis journal: every field comes back as it was written", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  CHECK(!j->degraded());
  CHECK(j->shared());
  CHECK(j->address() == "127.0.0.1:" + std::to_string(redis->port()) + "/0");
  auto all = j->LoadAll();
  REQUIRE(all.ok());
  CHECK(all->empty());

  SessionRecord r = Record(Id(1), 7);
  r.owner = std::string("key\0name", 8);
  // Every byte value in the tokens' little-endian bytes, NULs included.
  r.tokens = {0, 1, -1, 255, 256, 0x00ff0000, INT32_MIN, INT32_MAX, 0x01000000, -256};
  r.attachment = std::string("[{\"role\":\"user\"}]\0\xff\x00tail", 23);
  r.created = absl::FromUnixMicros(1700000000000001);
  r.last_used = absl::FromUnixMicros(1700000123456789);
  r.ttl = absl::Seconds(600) + absl::Microseconds(7);
  CHECK(PutAndWait(*j, r).ok());

  const SessionRecord got = MustGet(*j, r.id);
  CHECK(got.id == r.id);
  CHECK(got.owner == r.owner);
  CHECK(got.tokens == r.tokens);
  CHECK(got.attachment == r.attachment);
  CHECK(got.version == 7);
  CHECK(got.created == r.created);
  CHECK(got.last_used == r.last_used);
  CHECK(got.ttl == r.ttl);
  CHECK(Absent(*j, Id(2)));

  // The layout docs/deployment.md describes.
  Raw raw(redis->port());
  CHECK(raw.Status({"TYPE", Key(r.id)}) == "hash");
  CHECK(raw.Status({"HGET", Key(r.id), "format"}) == "1");
  CHECK(raw.Status({"HGET", Key(r.id), "version"}) == "7");
  CHECK(raw.Status({"HGET", Key(r.id), "created_us"}) == "1700000000000001");
  CHECK(raw.Status({"HGET", Key(r.id), "ttl_us"}) == "600000007");
  const std::string tokens = raw.Status({"HGET", Key(r.id), "tokens"});
  REQUIRE(tokens.size() == 40);
  CHECK(tokens.substr(8, 4) == std::string("\xff\xff\xff\xff", 4));   // -1
  CHECK(tokens.substr(16, 4) == std::string("\x00\x01\x00\x00", 4));  // 256
  CHECK(tokens.substr(24, 4) == std::string("\x00\x00\x00\x80", 4));  // INT32_MIN
  // Expires with the session's TTL, from this write.
  const long long pttl = raw.Integer({"PTTL", Key(r.id)});
  CHECK(pttl > 590000);
  CHECK(pttl <= 600001);
}

TEST_CASE("redis journal: a stale Put never overwrites a newer record", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  const std::string id = Id(1);
  CHECK(PutAndWait(*j, Record(id, 5)).ok());
  // A replica with an older copy: refused, and that is no error.
  SessionRecord stale = Record(id, 4);
  stale.attachment = "stale";
  CHECK(PutAndWait(*j, stale).ok());
  CHECK(MustGet(*j, id).attachment == "turn 5");
  SessionRecord same = Record(id, 5);
  same.attachment = "another turn 5";
  CHECK(PutAndWait(*j, same).ok());
  CHECK(MustGet(*j, id).attachment == "turn 5");
  CHECK(PutAndWait(*j, Record(id, 6)).ok());
  CHECK(MustGet(*j, id).version == 6);

  // Versions compare exactly beyond 2^53 (where a double would call them equal).
  const uint64_t big = uint64_t{1} << 60;
  CHECK(PutAndWait(*j, Record(id, big)).ok());
  CHECK(PutAndWait(*j, Record(id, big - 1)).ok());
  CHECK(MustGet(*j, id).version == big);
  CHECK(PutAndWait(*j, Record(id, big + 1)).ok());
  CHECK(MustGet(*j, id).version == big + 1);
  CHECK(PutAndWait(*j, Record(id, 99)).ok());  // shorter: smaller
  CHECK(MustGet(*j, id).version == big + 1);
  CHECK(PutAndWait(*j, Record(id, UINT64_MAX)).ok());
  CHECK(MustGet(*j, id).version == UINT64_MAX);
  CHECK(!j->degraded());
}

TEST_CASE("redis journal: a removed session stays removed", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url(), absl::Milliseconds(500), /*tombstone_ttl=*/absl::Hours(1));
  Raw raw(redis->port());
  const std::string id = Id(1);
  CHECK(PutAndWait(*j, Record(id, 3)).ok());
  CHECK(RemoveAndWait(*j, id).ok());
  CHECK(Absent(*j, id));
  // A tombstone, remembered for tombstone_ttl.
  CHECK(raw.Status({"HEXISTS", Key(id), "removed_us"}) == "1");
  CHECK(raw.Status({"HEXISTS", Key(id), "tokens"}) == "0");
  const long long pttl = raw.Integer({"PTTL", Key(id)});
  CHECK(pttl > 3590000);
  CHECK(pttl <= 3600000);

  // A turn that ended late does not bring it back...
  CHECK(PutAndWait(*j, Record(id, 4)).ok());
  CHECK(Absent(*j, id));
  // ...but a creation (version 0) may reuse the id.
  CHECK(PutAndWait(*j, Record(id, 0)).ok());
  CHECK(MustGet(*j, id).version == 0);
  CHECK(PutAndWait(*j, Record(id, 1)).ok());
  CHECK(MustGet(*j, id).version == 1);

  // Removing an id never stored leaves a tombstone too.
  CHECK(RemoveAndWait(*j, Id(2)).ok());
  CHECK(Absent(*j, Id(2)));
  CHECK(PutAndWait(*j, Record(Id(2), 1)).ok());
  CHECK(Absent(*j, Id(2)));
  CHECK(!j->degraded());
}

TEST_CASE("redis journal: a Remove and a Put coalesced still remove first", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  constexpr int kIds = 60;
  for (int i = 0; i < kIds; ++i) CHECK(PutAndWait(*j, Record(Id(i), 3)).ok());
  // Delete and re-create each id without waiting: the writer finds many Remove + Put pairs of
  // one id in one batch. Written as a bare Put, version 0 would be refused (3 is stored).
  std::atomic<int> answered{0};
  auto count = [&answered](absl::Status st) {
    CHECK(st.ok());
    answered.fetch_add(1);
  };
  for (int i = 0; i < kIds; ++i) {
    j->Remove(Id(i), count);
    SessionRecord again = Record(Id(i), 0);
    again.attachment = "recreated";
    j->Put(again, count);
  }
  // And the other way round: a Put then a Remove leaves nothing.
  for (int i = 0; i < kIds; ++i) {
    j->Put(Record(Id(1000 + i), 1), count);
    j->Remove(Id(1000 + i), count);
  }
  REQUIRE(Eventually([&] { return answered.load() == 4 * kIds; }));
  for (int i = 0; i < kIds; ++i) {
    const SessionRecord r = MustGet(*j, Id(i));
    CHECK(r.version == 0);
    CHECK(r.attachment == "recreated");
    CHECK(Absent(*j, Id(1000 + i)));
  }
}

TEST_CASE("redis journal: records expire with their TTL, tombstones with theirs",
          "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j =
      MustOpen(redis->url(), absl::Milliseconds(500), /*tombstone_ttl=*/absl::Milliseconds(400));
  SessionRecord r = Record(Id(1), 1);
  r.ttl = absl::Milliseconds(400);
  const auto written = Clock::now();
  CHECK(PutAndWait(*j, r).ok());
  CHECK(MustGet(*j, r.id).version == 1);
  REQUIRE(Eventually([&] { return Absent(*j, r.id); }, 5));
  const double gone_after = MsSince(written);
  INFO("gone after " << gone_after << " ms");
  CHECK(gone_after >= 350);

  // A removal is remembered for tombstone_ttl, then forgotten: after that, a late turn's Put is
  // written like any other.
  const std::string id = Id(2);
  CHECK(PutAndWait(*j, Record(id, 1)).ok());
  CHECK(RemoveAndWait(*j, id).ok());
  CHECK(PutAndWait(*j, Record(id, 2)).ok());
  CHECK(Absent(*j, id));
  Raw raw(redis->port());
  REQUIRE(Eventually([&] { return raw.Integer({"EXISTS", Key(id)}) == 0; }, 5));
  CHECK(PutAndWait(*j, Record(id, 2)).ok());
  CHECK(MustGet(*j, id).version == 2);
}

TEST_CASE("redis journal: a TTL of zero keeps the record, a huge one is capped", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  Raw raw(redis->port());
  SessionRecord forever = Record(Id(1), 1);
  forever.ttl = absl::ZeroDuration();
  CHECK(PutAndWait(*j, forever).ok());
  CHECK(raw.Integer({"PTTL", Key(Id(1))}) == -1);  // no expiry
  CHECK(MustGet(*j, Id(1)).ttl == absl::ZeroDuration());
  SessionRecord long_lived = Record(Id(2), 1);
  long_lived.ttl = absl::Hours(24.0 * 365 * 1000);  // a thousand years
  CHECK(PutAndWait(*j, long_lived).ok());
  CHECK(raw.Integer({"PTTL", Key(Id(2))}) > 0);
  CHECK(MustGet(*j, Id(2)).ttl == long_lived.ttl);
  // Beyond what PEXPIRE takes: capped (a script stopped by its error would have half-written).
  SessionRecord endless = Record(Id(3), 1);
  endless.ttl = absl::InfiniteDuration();
  CHECK(PutAndWait(*j, endless).ok());
  CHECK(raw.Integer({"PTTL", Key(Id(3))}) > 0);
  CHECK(MustGet(*j, Id(3)).ttl > absl::Hours(24.0 * 365 * 1000));
  // A tombstone's expiry is set again by a later record of no TTL: it does not linger.
  CHECK(RemoveAndWait(*j, Id(1)).ok());
  CHECK(raw.Integer({"PTTL", Key(Id(1))}) > 0);
  forever.version = 0;  // a creation, which may take a removed id
  CHECK(PutAndWait(*j, forever).ok());
  CHECK(MustGet(*j, Id(1)).version == 0);
  CHECK(raw.Integer({"PTTL", Key(Id(1))}) == -1);
  CHECK(!j->degraded());
}

TEST_CASE("redis journal: the database number keeps stores apart", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j0 = MustOpen(redis->url(0));
  auto j5 = MustOpen(redis->url(5));
  CHECK(j5->address() == "127.0.0.1:" + std::to_string(redis->port()) + "/5");
  const std::string id = Id(1);
  SessionRecord in5 = Record(id, 9);
  in5.owner = "bob";
  CHECK(PutAndWait(*j5, in5).ok());
  CHECK(Absent(*j0, id));
  CHECK(MustGet(*j5, id).owner == "bob");
  // A lower version in database 0 is no conflict: another store.
  CHECK(PutAndWait(*j0, Record(id, 1)).ok());
  CHECK(MustGet(*j0, id).version == 1);
  CHECK(MustGet(*j5, id).version == 9);
  CHECK(RemoveAndWait(*j0, id).ok());
  CHECK(MustGet(*j5, id).version == 9);
  Raw raw5(redis->port(), 5);
  CHECK(raw5.Status({"HGET", Key(id), "owner"}) == "bob");

  // A database the server does not have: refused at open (a configuration error).
  RedisJournalOptions o;
  o.url = redis->url(16);  // redis-server's default is 16 databases, 0..15
  auto bad = RedisSessionJournal::Open(o);
  CHECK(absl::IsFailedPrecondition(bad.status()));
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("SELECT 16"));
}

TEST_CASE("redis journal: a malformed URL or option is refused at open", "[state][redis]") {
  for (const std::string url :
       {"", "localhost:6379", "http://127.0.0.1:6379", "rediss://127.0.0.1:6379", "redis://",
        "redis://:6379", "redis://127.0.0.1:0", "redis://127.0.0.1:70000", "redis://127.0.0.1:1/x",
        "redis://127.0.0.1:1/0?db=1", "redis://pw@127.0.0.1:1"}) {
    INFO(url);
    RedisJournalOptions o;
    o.url = url;
    auto j = RedisSessionJournal::Open(o);
    CHECK(absl::IsInvalidArgument(j.status()));
    CHECK_THAT(std::string(j.status().message()), Catch::Contains("Redis URL"));
  }
  RedisJournalOptions o;
  o.url = "redis://127.0.0.1:1";
  o.timeout = absl::ZeroDuration();
  CHECK(absl::IsInvalidArgument(RedisSessionJournal::Open(o).status()));
  o.timeout = absl::Milliseconds(100);
  o.tombstone_ttl = -absl::Seconds(1);
  CHECK(absl::IsInvalidArgument(RedisSessionJournal::Open(o).status()));
}

TEST_CASE("redis journal: unreachable at open, degraded and quick, then written when it is up",
          "[state][redis]") {
  // A server that is gone: its port refuses connections.
  auto redis = RedisServer::Start();
  redis->Kill();
  const auto opening = Clock::now();
  auto j = MustOpen(redis->url(), absl::Milliseconds(500));
  CHECK(MsSince(opening) < 400);
  CHECK(j->degraded());
  CHECK(j->LoadAll()->empty());

  // Get: Unavailable without touching the network.
  for (int i = 0; i < 20; ++i) {
    const auto start = Clock::now();
    auto got = j->Get(Id(1));
    const double ms = MsSince(start);
    CHECK(absl::IsUnavailable(got.status()));
    CHECK(ms < 10);
  }
  // Put and Remove: an error at once, on another thread (Wait checks), the change kept.
  auto start = Clock::now();
  absl::Status st = PutAndWait(*j, Record(Id(1), 2));
  double ms = MsSince(start);
  INFO("Put answered after " << ms << " ms: " << st);
  CHECK(absl::IsUnavailable(st));
  CHECK(ms < 50);
  start = Clock::now();
  CHECK(absl::IsUnavailable(RemoveAndWait(*j, Id(2))));
  CHECK(MsSince(start) < 50);

  // Redis comes up: the journal connects on its own and writes what it kept.
  redis->Restart();
  const auto up = Clock::now();
  REQUIRE(Eventually([&] { return !j->degraded(); }));
  INFO("reconnected after " << MsSince(up) << " ms");
  CHECK(MsSince(up) < 6000);  // the retry interval is at most 5 s
  CHECK(MustGet(*j, Id(1)).version == 2);
  Raw raw(redis->port());
  CHECK(raw.Status({"HEXISTS", Key(Id(2)), "removed_us"}) == "1");
  CHECK(PutAndWait(*j, Record(Id(1), 3)).ok());
}

TEST_CASE("redis journal: killed mid-run, degraded, then back with every pending write",
          "[state][redis]") {
  LogCapture log;
  auto redis = RedisServer::Start();
  {
    auto j = MustOpen(redis->url());
    const std::string a = Id(1), b = Id(2), c = Id(3);
    CHECK(PutAndWait(*j, Record(a, 1)).ok());
    CHECK(PutAndWait(*j, Record(b, 1)).ok());
    REQUIRE(MustGet(*j, a).version == 1);  // Get's connection is open too

    redis->Kill();
    // The first write after the kill finds the connection closed: an error, promptly.
    auto start = Clock::now();
    absl::Status st = PutAndWait(*j, Record(a, 2));
    INFO(st);
    CHECK(absl::IsUnavailable(st));
    CHECK(MsSince(start) < 1000);
    CHECK(j->degraded());
    // Then every answer is immediate, and the changes pile up (the last per id wins).
    for (auto [id, version] : {std::pair{a, 3}, std::pair{c, 1}}) {
      start = Clock::now();
      CHECK(absl::IsUnavailable(PutAndWait(*j, Record(id, version))));
      CHECK(MsSince(start) < 50);
    }
    start = Clock::now();
    CHECK(absl::IsUnavailable(RemoveAndWait(*j, b)));
    CHECK(MsSince(start) < 50);
    start = Clock::now();
    CHECK(absl::IsUnavailable(j->Get(a).status()));
    CHECK(MsSince(start) < 10);

    // Several reconnection attempts fail meanwhile (0.2 s, then 0.4 s later, ...): still one
    // warning.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    redis->Restart();  // same port, empty
    const auto up = Clock::now();
    REQUIRE(Eventually([&] { return !j->degraded(); }));
    INFO("reconnected after " << MsSince(up) << " ms");
    CHECK(MsSince(up) < 6000);
    CHECK(MustGet(*j, a).version == 3);
    CHECK(MustGet(*j, c).version == 1);
    CHECK(Absent(*j, b));
    Raw raw(redis->port());
    CHECK(raw.Status({"HEXISTS", Key(b), "removed_us"}) == "1");
    CHECK(PutAndWait(*j, Record(a, 4)).ok());
    CHECK(!j->degraded());
  }
  // One warning for the outage (not one per write), one line for the recovery.
  const std::string text = log.text();
  INFO(text);
  size_t warnings = 0;
  for (size_t at = text.find("failed, sessions are kept in memory only"); at != std::string::npos;
       at = text.find("failed, sessions are kept in memory only", at + 1)) {
    ++warnings;
  }
  CHECK(warnings == 1);
  CHECK_THAT(text, Catch::Contains("is back"));
}

TEST_CASE("redis journal: a hung server costs one timeout, then every answer is immediate",
          "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url(), /*timeout=*/absl::Milliseconds(300));
  CHECK(PutAndWait(*j, Record(Id(1), 1)).ok());
  REQUIRE(MustGet(*j, Id(1)).version == 1);

  redis->Pause();  // connections are accepted, nothing answers
  auto start = Clock::now();
  auto got = j->Get(Id(1));
  double ms = MsSince(start);
  INFO("the first Get took " << ms << " ms: " << got.status());
  CHECK(absl::IsUnavailable(got.status()));
  CHECK(ms >= 250);
  CHECK(ms < 1500);
  CHECK(j->degraded());
  for (int i = 0; i < 10; ++i) {
    start = Clock::now();
    CHECK(absl::IsUnavailable(j->Get(Id(1)).status()));
    CHECK(MsSince(start) < 10);
  }
  // A Put's answer never waits for the writer, which spends a timeout in each of its attempts
  // to reach the hung server (at 0.2, 0.7, 1.6 s, ...): Puts over 1.5 s meet several.
  double slowest = 0;
  for (int v = 2; v <= 16; ++v) {
    start = Clock::now();
    CHECK(absl::IsUnavailable(PutAndWait(*j, Record(Id(1), v))));
    slowest = std::max(slowest, MsSince(start));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO("the slowest Put was answered after " << slowest << " ms");
  CHECK(slowest < 50);

  redis->Resume();
  REQUIRE(Eventually([&] { return !j->degraded(); }));
  CHECK(MustGet(*j, Id(1)).version == 16);
}

TEST_CASE("redis journal: Redis refusing writes degrades it until it takes them again",
          "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  Raw raw(redis->port());
  CHECK(PutAndWait(*j, Record(Id(1), 1)).ok());
  // Out of memory (maxmemory, no eviction): every write is refused with OOM.
  CHECK(raw.Status({"CONFIG", "SET", "maxmemory", "1"}) == "OK");
  absl::Status st = PutAndWait(*j, Record(Id(1), 2));
  INFO(st);
  CHECK(absl::IsUnavailable(st));
  CHECK_THAT(std::string(st.message()), Catch::Contains("OOM"));
  CHECK(j->degraded());
  CHECK(absl::IsUnavailable(PutAndWait(*j, Record(Id(2), 1))));
  CHECK(raw.Status({"HGET", Key(Id(1)), "version"}) == "1");
  CHECK(raw.Integer({"EXISTS", Key(Id(2))}) == 0);
  CHECK(raw.Status({"CONFIG", "SET", "maxmemory", "0"}) == "OK");
  REQUIRE(Eventually([&] { return !j->degraded(); }));
  CHECK(MustGet(*j, Id(1)).version == 2);
  CHECK(MustGet(*j, Id(2)).version == 1);
}

TEST_CASE("redis journal: connections the server closed are opened again, no outage",
          "[state][redis]") {
  LogCapture log;
  auto redis = RedisServer::Start();
  {
    auto j = MustOpen(redis->url());
    Raw raw(redis->port());
    CHECK(PutAndWait(*j, Record(Id(1), 1)).ok());
    CHECK(MustGet(*j, Id(1)).version == 1);
    // As a server with `timeout` set does to idle clients: both of the journal's connections go.
    CHECK(raw.Integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}) == 2);
    CHECK(PutAndWait(*j, Record(Id(1), 2)).ok());
    CHECK(MustGet(*j, Id(1)).version == 2);
    CHECK(!j->degraded());
  }
  CHECK_THAT(log.text(), !Catch::Contains("failed"));
}

TEST_CASE("redis journal: scripts flushed from the server are sent again", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  Raw raw(redis->port());
  CHECK(PutAndWait(*j, Record(Id(1), 1)).ok());
  CHECK(raw.Status({"SCRIPT", "FLUSH"}) == "OK");
  CHECK(PutAndWait(*j, Record(Id(1), 2)).ok());
  CHECK(RemoveAndWait(*j, Id(2)).ok());
  CHECK(MustGet(*j, Id(1)).version == 2);
  CHECK(raw.Status({"HEXISTS", Key(Id(2)), "removed_us"}) == "1");
  CHECK(!j->degraded());
}

TEST_CASE("redis journal: a key that is no session record is an error, not a crash",
          "[state][redis]") {
  LogCapture log;
  auto redis = RedisServer::Start();
  Raw raw(redis->port());
  {
    auto j = MustOpen(redis->url());
    const std::string str = Id(1), list = Id(2), foreign = Id(3), newer = Id(4), torn = Id(5),
                      partial = Id(6), bad_number = Id(7);
    raw.Command({"SET", Key(str), "hello"});
    raw.Command({"RPUSH", Key(list), "x"});
    raw.Command({"HSET", Key(foreign), "name", "someone else's"});
    raw.Command({"HSET", Key(newer), "format", "2", "version", "1"});
    CHECK(PutAndWait(*j, Record(torn, 1)).ok());
    raw.Command({"HSET", Key(torn), "tokens", "12345"});
    CHECK(PutAndWait(*j, Record(partial, 1)).ok());
    raw.Command({"HDEL", Key(partial), "last_used_us"});
    CHECK(PutAndWait(*j, Record(bad_number, 1)).ok());
    raw.Command({"HSET", Key(bad_number), "version", "-3"});

    struct Case {
      std::string id;
      std::string says;
    };
    for (const Case& c : std::vector<Case>{{str, "another type"},
                                           {list, "another type"},
                                           {foreign, "not a session record"},
                                           {newer, "format 2"},
                                           {torn, "tokens of 5 bytes"},
                                           {partial, "last_used_us"},
                                           {bad_number, "version"}}) {
      INFO(c.says);
      auto got = j->Get(c.id);
      CHECK(absl::IsFailedPrecondition(got.status()));
      const std::string message(got.status().message());
      CHECK_THAT(message, Catch::Contains(c.says));
      CHECK_THAT(message, Catch::Contains(c.id.substr(0, 8)));
      CHECK_THAT(message, !Catch::Contains(c.id));
    }
    // Writes to someone else's key fail and leave it alone; the journal is not degraded.
    for (const std::string& id : {str, list, foreign, newer}) {
      CHECK(absl::IsFailedPrecondition(PutAndWait(*j, Record(id, 9))));
      CHECK(absl::IsFailedPrecondition(RemoveAndWait(*j, id)));
    }
    CHECK(raw.Status({"GET", Key(str)}) == "hello");
    CHECK(raw.Status({"LINDEX", Key(list), "0"}) == "x");
    CHECK(raw.Status({"HGET", Key(foreign), "name"}) == "someone else's");
    CHECK(raw.Status({"HGET", Key(newer), "version"}) == "1");
    CHECK(!j->degraded());
    // The rest works as before.
    CHECK(PutAndWait(*j, Record(Id(8), 1)).ok());
    CHECK(MustGet(*j, Id(8)).version == 1);
    CHECK(!j->degraded());
  }
  // The warnings name the sessions by their first 8 characters only.
  const std::string text = log.text();
  INFO(text);
  CHECK_THAT(text, Catch::Contains(Id(1).substr(0, 8) + "..."));
  for (int i = 1; i <= 8; ++i) CHECK_THAT(text, !Catch::Contains(Id(i)));
}

TEST_CASE("redis journal: many threads put and get at once", "[state][redis]") {
  auto redis = RedisServer::Start();
  auto j = MustOpen(redis->url());
  constexpr int kThreads = 8, kTurns = 60;
  const std::string shared = Id(999);
  std::atomic<int> answers{0}, errors{0}, twice{0}, backwards{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string mine = Id(t);
      // The versions this thread saw of its own session and of the shared one.
      uint64_t seen[2] = {0, 0};
      for (int v = 0; v < kTurns; ++v) {
        // The shared session's versions arrive out of order from the threads: the
        // compare-and-set keeps the highest.
        for (const SessionRecord& r : {Record(mine, v), Record(shared, v * kThreads + t)}) {
          auto called = std::make_shared<std::atomic<bool>>(false);
          j->Put(r, [&, called](absl::Status st) {
            if (called->exchange(true)) twice.fetch_add(1);
            if (!st.ok()) errors.fetch_add(1);
            answers.fetch_add(1);
          });
        }
        for (int k = 0; k < 2; ++k) {
          auto got = j->Get(k == 0 ? mine : shared);
          if (!got.ok()) {
            errors.fetch_add(1);
            continue;
          }
          // A stored version never goes back.
          if (got->has_value()) {
            if ((*got)->version < seen[k]) backwards.fetch_add(1);
            seen[k] = (*got)->version;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(Eventually([&] { return answers.load() == 2 * kThreads * kTurns; }));
  CHECK(errors.load() == 0);
  CHECK(twice.load() == 0);
  CHECK(backwards.load() == 0);
  for (int t = 0; t < kThreads; ++t) CHECK(MustGet(*j, Id(t)).version == kTurns - 1);
  // The last change of an id written wins unless the store holds a higher version: one of the
  // last round's (each thread's last Put is of that round; pending changes of one id merge, the
  // last called winning, as the contract says).
  const uint64_t last = MustGet(*j, shared).version;
  CHECK(last >= (kTurns - 1) * kThreads);
  CHECK(last <= (kTurns - 1) * kThreads + kThreads - 1);
  CHECK(!j->degraded());
}

TEST_CASE("redis journal: the destructor writes what is pending and answers everyone",
          "[state][redis]") {
  auto redis = RedisServer::Start();
  constexpr int kIds = 50;
  std::atomic<int> ok{0}, answered{0};
  {
    auto j = MustOpen(redis->url());
    for (int i = 0; i < kIds; ++i) {
      j->Put(Record(Id(i), 1), [&](absl::Status st) {
        if (st.ok()) ok.fetch_add(1);
        answered.fetch_add(1);
      });
    }
  }
  CHECK(answered.load() == kIds);
  CHECK(ok.load() == kIds);
  auto j = MustOpen(redis->url());
  for (int i = 0; i < kIds; ++i) CHECK(MustGet(*j, Id(i)).version == 1);

  // Down at shutdown: one attempt, and every caller still gets its answer.
  std::atomic<int> failed{0};
  {
    auto gone = MustOpen(redis->url());
    redis->Kill();
    for (int i = 0; i < kIds; ++i) {
      gone->Put(Record(Id(i), 2), [&](absl::Status st) {
        if (!st.ok()) failed.fetch_add(1);
      });
    }
  }
  CHECK(failed.load() == kIds);
}

}  // namespace redis_session_journal_test
}  // namespace textgen::state
