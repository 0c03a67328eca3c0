// Durable sessions end to end: servers with --state-dir are killed (SIGKILL) at random points
// while several sessions are mid-conversation, greedy and seeded, and restarted on the same
// directory: every turn a client saw end continues with the tokens of an uninterrupted run, a
// turn the crash cut is not in the history, deleted sessions stay gone, and a session still
// answers only to its owner.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/server/openai_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/support/metrics_scrape.h"

namespace textgen::testing {
namespace durable_sessions_test {

constexpr int kSessions = 4;  // even: greedy, odd: seeded sampling
constexpr int kTurns = 4;
constexpr int kRuns = 20;
const char* const kTurnText[kTurns] = {"Once upon a time", " The dog ran to the park",
                                       " Then the sun came out", " She smiled and said"};

std::string KeysFile() {
  static const std::string path = [] {
    std::string p = ScratchDir() + "/keys";
    WriteFile(p, "alice-key-0123456789abcdef alice\nbob-key-0123456789abcdef bob\n");
    return p;
  }();
  return path;
}

// Same arithmetic everywhere: a conversation recomputed after a restart gives the logits its
// cached KV gave (F32, and every row computed alone whatever else runs).
std::unique_ptr<ServerProcess> StartServer(const std::string& state_dir) {
  ServerProcessOptions o;
  // A small KV pool: it is committed at start, and these conversations are short.
  o.extra_args = {"--compute",       "f32",      "--batch-invariant", "on",
                  "--kernel-select", "table",    "--kv-cache-mib",    "16",
                  "--api-keys-file", KeysFile(), "--log-level",       "warn"};
  if (!state_dir.empty()) {
    o.extra_args.push_back("--state-dir");
    o.extra_args.push_back(state_dir);
  }
  return std::make_unique<ServerProcess>(o);
}

// Random-looking (the server refuses ids that are not), one per run and session.
std::string SessionId(int run, int s) {
  std::mt19937_64 bits(static_cast<uint64_t>(run) * 1000 + static_cast<uint64_t>(s) + 1);
  const uint64_t hi = bits(), lo = bits();
  return absl::StrFormat("%016x%016x", hi, lo);
}

void Authorize(grpc::ClientContext& ctx, const std::string& key = "alice-key-0123456789abcdef") {
  ctx.AddMetadata("authorization", "Bearer " + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

grpc::Status Create(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::CreateSessionRequest req;
  req.set_session_id(id);
  v1::Session session;
  return stub.CreateSession(&ctx, req, &session);
}

grpc::Status Delete(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  Authorize(ctx);
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

v1::GenerateRequest TurnRequest(const std::string& id, int s, int t) {
  v1::GenerateRequest req;
  req.set_session_id(id);
  req.set_prompt(kTurnText[t]);
  req.set_max_new_tokens(8);
  req.set_ignore_eos(true);
  if (s % 2 == 1) {
    req.set_method(v1::SAMPLE);
    req.set_temperature(0.9f);
    req.set_seed(1000 + 10 * s + t);
  }
  return req;
}

// One Generate call (fail-fast: a call to a killed server ends at once).
struct Turn {
  grpc::Status status;
  std::vector<int32_t> ids;
  uint32_t prompt_tokens = 0;
};

Turn Generate(v1::TextGeneration::Stub& stub, const v1::GenerateRequest& req,
              const std::string& key = "alice-key-0123456789abcdef") {
  grpc::ClientContext ctx;
  Authorize(ctx, key);
  Turn out;
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse m, last;
  while (reader->Read(&m)) last = m;
  out.status = reader->Finish();
  if (out.status.ok() && last.hypotheses_size() > 0) {
    out.ids.assign(last.hypotheses(0).ids().begin(), last.hypotheses(0).ids().end());
    out.prompt_tokens = last.usage().prompt_tokens();
  }
  return out;
}

// How many tokens the session holds, without changing it: a turn that cannot fit the context is
// refused before it runs, with a message that says so. -1: NOT_FOUND.
int HeldTokens(v1::TextGeneration::Stub& stub, const std::string& id,
               const std::string& key = "alice-key-0123456789abcdef") {
  v1::GenerateRequest req;
  req.set_session_id(id);
  req.add_prompt_ids(5);
  req.set_max_new_tokens(4000);  // > the 512-token context, <= --max-max-new-tokens
  Turn t = Generate(stub, req, key);
  if (t.status.error_code() == grpc::StatusCode::NOT_FOUND) return -1;
  INFO(t.status.error_message());
  REQUIRE(t.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  std::smatch m;
  const std::string msg = t.status.error_message();
  REQUIRE(std::regex_search(msg, m, std::regex("it holds ([0-9]+) tokens")));
  return std::stoi(m[1]);
}

// The uninterrupted conversations: each turn's answer, and the tokens held after each turn.
struct Reference {
  std::vector<int32_t> answer[kSessions][kTurns];
  int held[kSessions][kTurns + 1] = {};
  std::chrono::milliseconds duration{0};
};

const Reference& GetReference() {
  static const Reference ref = [] {
    Reference r;
    auto server = StartServer("");  // memory only: the state dir must change nothing
    auto stub = NewStub(*server);
    const auto start = std::chrono::steady_clock::now();
    // Catch's assertions belong to the test's thread: the others note their failures.
    std::string failures[kSessions];
    std::vector<std::thread> threads;
    for (int s = 0; s < kSessions; ++s) {
      threads.emplace_back([&, s] {
        const std::string id = SessionId(99, s);
        grpc::Status created = Create(*stub, id);
        if (!created.ok()) {
          failures[s] = "CreateSession: " + created.error_message();
          return;
        }
        for (int t = 0; t < kTurns; ++t) {
          Turn turn = Generate(*stub, TurnRequest(id, s, t));
          if (!turn.status.ok()) {
            failures[s] = "turn " + std::to_string(t) + ": " + turn.status.error_message();
            return;
          }
          r.answer[s][t] = turn.ids;
          r.held[s][t + 1] = static_cast<int>(turn.prompt_tokens + turn.ids.size());
        }
      });
    }
    for (auto& th : threads) th.join();
    for (const std::string& f : failures) {
      INFO(f);
      REQUIRE(f.empty());
    }
    r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return r;
  }();
  return ref;
}

// One client's view of its session while the server ran.
struct Progress {
  std::atomic<bool> created{false};
  std::atomic<int> completed{0};      // turns whose end it saw
  std::atomic<int> attempted{0};      // turns it sent
  std::atomic<bool> mismatch{false};  // a turn's answer differed from the reference
};

// What the runs exercised, over all of them.
struct Tally {
  int continued = 0;  // sessions that continued after a restart from a committed turn
  int cut = 0;        // sessions whose turn the crash cut
};

void RunCrash(int run, std::mt19937& rng, const Reference& ref, Tally& tally) {
  const std::string dir = ScratchDir() + "/state";
  auto server = StartServer(dir);
  auto stub = NewStub(*server);
  Progress progress[kSessions];
  const std::string doomed = SessionId(run, 50);  // created, one turn, deleted
  std::atomic<bool> deleted{false};
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      const std::string id = SessionId(run, s);
      if (!Create(*stub, id).ok()) return;
      progress[s].created = true;
      for (int t = 0; t < kTurns; ++t) {
        progress[s].attempted = t + 1;
        Turn turn = Generate(*stub, TurnRequest(id, s, t));
        if (!turn.status.ok()) return;
        // While it runs, the durable server answers as the memory-only one.
        if (turn.ids != ref.answer[s][t]) progress[s].mismatch = true;
        progress[s].completed = t + 1;
      }
    });
  }
  threads.emplace_back([&] {
    if (!Create(*stub, doomed).ok()) return;
    if (!Generate(*stub, TurnRequest(doomed, 0, 0)).status.ok()) return;
    if (Delete(*stub, doomed).ok()) deleted = true;
  });
  // Anywhere from before the first turn to after the last.
  const int window = static_cast<int>(ref.duration.count() * 13 / 10) + 20;
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<int>(0, window)(rng)));
  REQUIRE(::kill(server->pid(), SIGKILL) == 0);
  for (auto& th : threads) th.join();
  server->Stop();

  auto restarted = StartServer(dir);
  stub = NewStub(*restarted);
  for (int s = 0; s < kSessions; ++s) {
    const std::string id = SessionId(run, s);
    const int completed = progress[s].completed, attempted = progress[s].attempted;
    INFO("run " << run << " session " << s << ": completed " << completed << ", attempted "
                << attempted);
    CHECK(!progress[s].mismatch);
    const int held = HeldTokens(*stub, id);
    if (held < 0) {
      // Only a session whose creation the client never saw may be missing.
      CHECK(!progress[s].created);
      continue;
    }
    // The version the server holds: at least every turn the client saw end; at most the one
    // the crash cut (written, but its last message never arrived).
    int version = -1;
    for (int v = 0; v <= kTurns; ++v) {
      if (ref.held[s][v] == held) version = v;
    }
    INFO("held " << held << " tokens: version " << version);
    REQUIRE(version >= completed);
    REQUIRE(version <= attempted);
    if (completed > 0 && s == 0) {
      // Another principal still gets NOT_FOUND.
      CHECK(HeldTokens(*stub, id, "bob-key-0123456789abcdef") == -1);
    }
    for (int t = version; t < kTurns; ++t) {
      Turn turn = Generate(*stub, TurnRequest(id, s, t));
      INFO("turn " << t << ": " << turn.status.error_message());
      REQUIRE(turn.status.ok());
      CHECK(turn.ids == ref.answer[s][t]);
    }
    if (version > 0) ++tally.continued;
    if (attempted > completed) ++tally.cut;
  }
  if (deleted) CHECK(HeldTokens(*stub, doomed) == -1);
  CHECK(restarted->Stop() == 0);
}

TEST_CASE("sessions continue after kill -9 with the tokens of an uninterrupted run",
          "[server][durable]") {
  const Reference& ref = GetReference();
  std::mt19937 rng(std::random_device{}());
  Tally tally;
  for (int run = 0; run < kRuns; ++run) RunCrash(run, rng, ref, tally);
  // The kills fell where they matter: after committed turns, and into turns.
  INFO("continued " << tally.continued << ", cut " << tally.cut);
  CHECK(tally.continued >= kRuns / 2);
  CHECK(tally.cut >= kRuns / 4);
}

// textgen-server on `state_dir` in the foreground: its exit code and output (it must exit by
// itself, i.e. refuse to start).
CommandResult RunRefused(const std::string& state_dir, const std::string& more = "") {
  const std::string bin = std::string(std::getenv("TEXTGEN_BIN_DIR")) + "/textgen-server";
  return RunCommand("timeout 60 " + bin + " --model " + ShellQuote(ModelPath("stories260K.gguf")) +
                    " --listen 127.0.0.1:0 --kv-cache-mib 16 --state-dir " + ShellQuote(state_dir) +
                    " " + more + " 2>&1");
}

TEST_CASE("a second server on a state directory, or a corrupted database, is refused",
          "[server][durable]") {
  const std::string dir = ScratchDir() + "/state";
  {
    auto first = StartServer(dir);
    CommandResult second = RunRefused(dir);
    CHECK(second.exit_code == 1);
    CHECK_THAT(second.out, Catch::Contains("cannot start") &&
                               Catch::Contains(dir + "/sessions.lock") &&
                               Catch::Contains("another textgen-server"));
    CHECK(first->Running());
  }
  WriteFile(dir + "/sessions.sqlite3", std::string(8192, 'x'));
  CommandResult corrupt = RunRefused(dir);
  CHECK(corrupt.exit_code == 1);
  CHECK_THAT(corrupt.out,
             Catch::Contains(dir + "/sessions.sqlite3") && Catch::Contains("--state-reset"));
  // The way out: moved aside, and the server serves (with no sessions).
  ServerProcessOptions o;
  o.extra_args = {"--kv-cache-mib", "16", "--state-dir", dir, "--state-reset"};
  ServerProcess reset(o);
  CHECK_THAT(reset.Log(), Catch::Contains("sessions.sqlite3.broken-"));
  CHECK(ReadFile(dir + "/sessions.sqlite3").substr(0, 15) == "SQLite format 3");
  // Without a directory the reset is a bad flag (exit 2), not silently ignored.
  CommandResult bad = RunCommand(std::string(std::getenv("TEXTGEN_BIN_DIR")) +
                                 "/textgen-server --state-reset 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--state-reset needs --state-dir"));
}

TEST_CASE("an unwritable state directory serves sessions from memory, degraded",
          "[server][durable]") {
  // Below a regular file: unwritable for root too.
  const std::string file = ScratchDir() + "/file";
  WriteFile(file, "x");
  const int metrics_port = PickFreePort();
  const int http_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--kv-cache-mib",   "16",
                  "--state-dir",      file + "/state",
                  "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port),
                  "--http-listen",    "127.0.0.1:" + std::to_string(http_port)};
  ServerProcess server(o);
  CHECK_THAT(server.Log(),
             Catch::Contains("warning") && Catch::Contains("sessions are kept in memory only"));
  CHECK(ScrapeMetrics(metrics_port).Get("textgen_state_store_degraded") == 1);
  // Still ready (it serves), and /ready says the store is degraded.
  const HttpReply ready = Get(http_port, "/ready");
  CHECK(ready.status == 200);
  CHECK(ready.json["state_store"] == "degraded");
  // Sessions work (in memory).
  auto stub = NewStub(server);
  grpc::ClientContext ctx;
  v1::Session session;
  REQUIRE(stub->CreateSession(&ctx, v1::CreateSessionRequest(), &session).ok());
  v1::GenerateRequest turn;
  turn.set_session_id(session.session_id());
  turn.set_prompt("Once upon a time");
  turn.set_max_new_tokens(4);
  CHECK(RunGenerate(*stub, turn).status.ok());
  CHECK(RunGenerate(*stub, turn).status.ok());

  // A writable one: not degraded (and fsyncs left to the OS).
  const int port2 = PickFreePort();
  o.extra_args = {"--kv-cache-mib",   "16",
                  "--state-dir",      ScratchDir() + "/ok",
                  "--metrics-listen", "127.0.0.1:" + std::to_string(port2)};
  o.extra_args.push_back("--state-sync");
  o.extra_args.push_back("normal");
  const int http2 = PickFreePort();
  o.extra_args.push_back("--http-listen");
  o.extra_args.push_back("127.0.0.1:" + std::to_string(http2));
  ServerProcess fine(o);
  CHECK(ScrapeMetrics(port2).Get("textgen_state_store_degraded") == 0);
  CHECK(Get(http2, "/ready").json["state_store"] == "ok");
  CHECK_THAT(fine.Log(), Catch::Contains("sessions.sqlite3 (synchronous=normal)"));
}

}  // namespace durable_sessions_test
}  // namespace textgen::testing
