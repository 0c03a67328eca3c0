// Sessions shared in Redis (--state-store) behind docker/nginx/textgen.conf, on loopback: the
// replica holding a session is killed (SIGKILL) mid-conversation, nginx sends the next turn to
// the other replica, which continues it with the tokens of an uninterrupted run (greedy and
// seeded), and no call the surviving replica took fails. Then Redis itself goes away: the
// replica keeps serving (sessions in memory, textgen_state_store_degraded 1, /ready still
// ready), and once Redis is back it reconnects and writes what it kept, so a third server
// continues the conversation.
#include <signal.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/textgen_client_rpc.h"
#include "tests/docker/session_calls.h"
#include "tests/support/generate_stream.h"
#include "tests/support/metrics_scrape.h"
#include "tests/support/nginx_process.h"
#include "tests/support/redis_server.h"
#include "tests/support/server_process.h"
#include "tests/test_util.h"

namespace textgen::testing {
namespace nginx_shared_sessions_test {

namespace v1 = ::textgen::v1;
using client::kSessionMetadataKey;

constexpr int kTurns = 4;
const char* const kTurnText[kTurns] = {"Once upon a time", " The dog ran to the park",
                                       " Then the sun came out", " She smiled and said"};

struct Replica {
  int metrics_port = 0;
  std::unique_ptr<ServerProcess> server;

  // Generate calls that ended with `code` (no sample before the first one: 0).
  double Generates(const std::string& code) const {
    double n = 0;
    for (const Sample& s : ScrapeMetrics(metrics_port).All("textgen_requests_total")) {
      if (s.labels.at("method") == "Generate" && s.labels.at("code") == code) n += s.value;
    }
    return n;
  }
  double Degraded() const {
    return ScrapeMetrics(metrics_port).Get("textgen_state_store_degraded");
  }
};

// F32 and batch-invariant: a conversation recomputed on another replica gives the logits its
// cached KV gave.
Replica StartReplica(const std::string& redis_url) {
  Replica r;
  r.metrics_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--metrics-listen",  "127.0.0.1:" + std::to_string(r.metrics_port),
                  "--kv-cache-mib",    "16",
                  "--compute",         "f32",
                  "--batch-invariant", "on",
                  "--kernel-select",   "table",
                  "--state-store",     redis_url};
  r.server = std::make_unique<ServerProcess>(o);
  return r;
}

// Turn `t` of a session; odd `kind`: seeded sampling, else greedy.
StreamResult Turn(v1::TextGeneration::Stub& stub, const std::string& id, int kind, int t) {
  v1::GenerateRequest req;
  req.set_session_id(id);
  req.set_prompt(kTurnText[t]);
  req.set_max_new_tokens(8);
  req.set_ignore_eos(true);
  if (kind % 2 == 1) {
    req.set_method(v1::SAMPLE);
    req.set_temperature(0.9f);
    req.set_seed(500 + t);
  }
  return RunGenerate(stub, req, 30000, {{kSessionMetadataKey, id}});
}

TEST_CASE("a replica killed mid-conversation: the other continues its sessions from Redis",
          "[docker][nginx][redis]") {
  std::unique_ptr<RedisServer> redis = RedisServer::Start();
  std::array<Replica, 2> replicas = {StartReplica(redis->url(2)), StartReplica(redis->url(2))};
  NginxProcess lb({replicas[0].server->address(), replicas[1].server->address()});
  auto stub = v1::TextGeneration::NewStub(lb.NewChannel());
  std::mt19937_64 rng(std::random_device{}());

  // The uninterrupted conversations (greedy, seeded), through nginx, no kill.
  std::vector<int32_t> want[2][kTurns];
  for (int kind = 0; kind < 2; ++kind) {
    const std::string id = RandomSessionId(rng);
    REQUIRE(CreateSession(*stub, id).ok());
    for (int t = 0; t < kTurns; ++t) {
      StreamResult r = Turn(*stub, id, kind, t);
      INFO(r.status.error_message());
      REQUIRE(r.status.ok());
      want[kind][t] = r.ids;
    }
  }

  // Two sessions, both on one replica (ids redrawn until the hash puts the second where the
  // first went), one turn each; that replica is then killed.
  std::string ids[2];
  int holder = -1;
  for (int kind = 0; kind < 2; ++kind) {
    for (int draw = 0;; ++draw) {
      REQUIRE(draw < 200);
      const std::string id = RandomSessionId(rng);
      REQUIRE(CreateSession(*stub, id).ok());
      const std::array<double, 2> before = {replicas[0].Generates("OK"),
                                            replicas[1].Generates("OK")};
      StreamResult r = Turn(*stub, id, kind, 0);
      INFO(r.status.error_message());
      REQUIRE(r.status.ok());
      CHECK(r.ids == want[kind][0]);
      const int where = replicas[0].Generates("OK") > before[0] ? 0 : 1;
      if (holder == -1 || where == holder) {
        holder = where;
        ids[kind] = id;
        break;
      }
    }
  }
  Replica& survivor = replicas[1 - holder];
  // Sessionless calls keep coming while the replica dies.
  std::atomic<bool> stop_traffic{false};
  std::thread traffic([&] {
    auto own = v1::TextGeneration::NewStub(lb.NewChannel());
    while (!stop_traffic.load()) {
      v1::GenerateRequest req;
      req.set_prompt("Once upon a time");
      req.set_max_new_tokens(4);
      RunGenerate(*own, req, 30000);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(::kill(replicas[holder].server->pid(), SIGKILL) == 0);
  for (int i = 0; i < 100 && replicas[holder].server->Running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(!replicas[holder].server->Running());
  // Every later turn can only be the survivor's: it never held these sessions.
  for (int t = 1; t < kTurns; ++t) {
    for (int kind = 0; kind < 2; ++kind) {
      StreamResult r = Turn(*stub, ids[kind], kind, t);
      INFO("kind " << kind << " turn " << t << ": " << r.status.error_code() << " "
                   << r.status.error_message() << "\n"
                   << lb.AccessLog());
      REQUIRE(r.status.ok());
      CHECK(r.ids == want[kind][t]);
    }
  }
  stop_traffic = true;
  traffic.join();
  // Every Generate the survivor took ended OK.
  for (const std::string code : {"CANCELLED", "UNKNOWN", "INTERNAL", "UNAVAILABLE", "NOT_FOUND"}) {
    INFO(code);
    CHECK(survivor.Generates(code) == 0);
  }
  CHECK(survivor.Degraded() == 0);
}

TEST_CASE("Redis lost and back: the replica serves from memory, then writes what it kept",
          "[docker][redis]") {
  std::unique_ptr<RedisServer> redis = RedisServer::Start();
  Replica a = StartReplica(redis->url());
  auto stub = v1::TextGeneration::NewStub(a.server->NewChannel());
  std::mt19937_64 rng(std::random_device{}());
  const std::string ref = RandomSessionId(rng), id = RandomSessionId(rng);
  std::vector<int32_t> want[kTurns];
  REQUIRE(CreateSession(*stub, ref).ok());
  for (int t = 0; t < kTurns; ++t) want[t] = Turn(*stub, ref, 0, t).ids;

  REQUIRE(CreateSession(*stub, id).ok());
  REQUIRE(Turn(*stub, id, 0, 0).ids == want[0]);
  redis->Kill();
  // Turns go on from memory, and finish without waiting for Redis.
  for (int t = 1; t < 3; ++t) {
    const auto start = std::chrono::steady_clock::now();
    StreamResult r = Turn(*stub, id, 0, t);
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
    CHECK(r.ids == want[t]);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
  CHECK(a.Degraded() == 1);
  StreamResult sessionless = RunGenerate(*stub, [] {
    v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_new_tokens(4);
    return req;
  }());
  CHECK(sessionless.status.ok());
  CHECK(a.server->Running());

  // Back (empty, on the same port): the replica reconnects and writes the session it kept.
  redis->Restart();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (a.Degraded() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(a.Degraded() == 0);
  // Another server on the same Redis continues the conversation where the first left it.
  Replica b = StartReplica(redis->url());
  auto other = v1::TextGeneration::NewStub(b.server->NewChannel());
  StreamResult r = Turn(*other, id, 0, 3);
  INFO(r.status.error_message());
  REQUIRE(r.status.ok());
  CHECK(r.ids == want[3]);
}

TEST_CASE(
    "textgen-server --state-store: a malformed address is refused, an unreachable Redis is not",
    "[docker][redis]") {
  const std::string server = std::string(std::getenv("TEXTGEN_BIN_DIR")) + "/textgen-server";
  // Not a Redis URL: a bad flag (exit 2).
  CommandResult bad = RunCommand(server + " --state-store 127.0.0.1:6379 2>&1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("redis://HOST:PORT[/DB]"));
  CommandResult reset = RunCommand(server + " --state-dir /tmp --state-reset " +
                                   "--state-store redis://127.0.0.1:1 2>&1");
  CHECK(reset.exit_code == 2);
  // A Redis URL the store cannot use: the start fails naming it (exit 1).
  CommandResult port =
      RunCommand(server + " --model " + std::string(std::getenv("TEXTGEN_MODELS")) +
                 "/stories260K.gguf --state-store redis://127.0.0.1:99999 2>&1");
  CHECK(port.exit_code == 1);
  CHECK_THAT(port.out, Catch::Contains("99999"));
  // Nothing listens there: the server starts and serves, degraded, with a warning.
  const int metrics_port = PickFreePort();
  ServerProcessOptions o;
  o.extra_args = {"--kv-cache-mib",   "16",
                  "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port),
                  "--state-store",    "redis://127.0.0.1:" + std::to_string(PickFreePort())};
  ServerProcess lone(o);
  auto stub = v1::TextGeneration::NewStub(lone.NewChannel());
  std::mt19937_64 rng(3);
  const std::string id = RandomSessionId(rng);
  REQUIRE(CreateSession(*stub, id).ok());
  StreamResult r = Turn(*stub, id, 0, 0);
  INFO(r.status.error_message());
  CHECK(r.status.ok());
  CHECK(ScrapeMetrics(metrics_port).Get("textgen_state_store_degraded") == 1);
  CHECK_THAT(lone.Log(), Catch::Contains("warning"));
}

}  // namespace nginx_shared_sessions_test
}  // namespace textgen::testing
