// docker/nginx/textgen.conf in front of two textgen-server replicas on loopback, over real gRPC:
// every call of a session reaches the replica holding its KV cache, sessionless calls are
// spread round-robin, and when a replica stops its load moves to the other one.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/textgen_client_rpc.h"
#include "tests/docker/session_calls.h"
#include "tests/support/generate_stream.h"
#include "tests/support/metrics_scrape.h"
#include "tests/support/nginx_process.h"
#include "tests/support/server_process.h"

namespace textgen::testing {
namespace nginx_affinity_test {

namespace v1 = ::textgen::v1;
using client::kSessionMetadataKey;

// A replica and its /metrics: what it counts tells which replica served which call.
struct Replica {
  int metrics_port = 0;
  std::unique_ptr<ServerProcess> server;

  double Sessions() const { return ScrapeMetrics(metrics_port).Get("textgen_sessions"); }
  // Generate calls that ended OK (the counter has no sample before the first one).
  double GeneratesOk() const {
    double n = 0;
    for (const Sample& s : ScrapeMetrics(metrics_port).All("textgen_requests_total")) {
      if (s.labels.at("method") == "Generate" && s.labels.at("code") == "OK") n += s.value;
    }
    return n;
  }
};

Replica StartReplica() {
  Replica r;
  r.metrics_port = PickFreePort();
  ServerProcessOptions o;
  // A small KV pool: two servers share the machine with other tests. No prefix cache: a
  // session's first turn would then reuse the KV of an earlier session's identical first
  // prompt, and cached_tokens would no longer tell a session's own KV from a shared prefix.
  o.extra_args = {"--metrics-listen", "127.0.0.1:" + std::to_string(r.metrics_port),
                  "--kv-cache-mib",   "16",
                  "--prefix-cache",   "off"};
  r.server = std::make_unique<ServerProcess>(o);
  return r;
}

// DeleteSession as textgen-client makes it: the id in the request and in
// the x-session-id metadata that nginx hashes on.
grpc::Status DeleteSession(v1::TextGeneration::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ctx.AddMetadata(kSessionMetadataKey, id);
  v1::DeleteSessionRequest req;
  req.set_session_id(id);
  v1::DeleteSessionResponse resp;
  return stub.DeleteSession(&ctx, req, &resp);
}

// One short turn; `session` empty = a sessionless call (no metadata either).
StreamResult Turn(v1::TextGeneration::Stub& stub, const std::string& session,
                  const std::string& prompt) {
  v1::GenerateRequest req;
  req.set_prompt(prompt);
  req.set_max_new_tokens(8);
  if (session.empty()) return RunGenerate(stub, req);
  req.set_session_id(session);
  return RunGenerate(stub, req, 30000, {{kSessionMetadataKey, session}});
}

TEST_CASE("nginx keeps each session on its replica and spreads sessionless calls",
          "[docker][nginx]") {
  std::array<Replica, 2> replicas = {StartReplica(), StartReplica()};
  NginxProcess lb({replicas[0].server->address(), replicas[1].server->address()});
  auto stub = v1::TextGeneration::NewStub(lb.NewChannel());

  // Ten sessions with random ids, each created through nginx; the sessions gauges tell which
  // replica took it.
  constexpr int kSessions = 10, kTurns = 5;
  struct Conversation {
    std::string id;
    int replica;
  };
  std::vector<Conversation> conversations;
  std::array<int, 2> held = {0, 0};
  std::mt19937_64 rng(std::random_device{}());
  int redrawn = 0;
  while (static_cast<int>(conversations.size()) < kSessions) {
    const std::string id = RandomSessionId(rng);
    const std::array<double, 2> before = {replicas[0].Sessions(), replicas[1].Sessions()};
    grpc::Status st = CreateSession(*stub, id);
    INFO("CreateSession " << id << ": " << st.error_message() << "\n" << lb.AccessLog());
    REQUIRE(st.ok());
    const std::array<double, 2> gained = {replicas[0].Sessions() - before[0],
                                          replicas[1].Sessions() - before[1]};
    REQUIRE(gained[0] + gained[1] == 1);
    const int where = gained[0] == 1 ? 0 : 1;
    // Ten random ids all land on one replica with probability ~2^-9 (more with the ring's
    // uneven split), and then the test would show nothing about spreading. So the last one
    // must land where none did: other ids are dropped and redrawn (expected draws: 2).
    if (static_cast<int>(conversations.size()) == kSessions - 1 && held[1 - where] == 0) {
      REQUIRE(DeleteSession(*stub, id).ok());
      REQUIRE(++redrawn < 100);
      continue;
    }
    conversations.push_back({id, where});
    ++held[where];
  }
  REQUIRE(held[0] > 0);
  REQUIRE(held[1] > 0);

  // Five turns each, interleaved across sessions in a new random order every round: in a
  // fixed order, plain round-robin over an even number of sessions would send every turn to
  // the replica that created its session and pass unnoticed. A turn that reached the other
  // replica fails with NOT_FOUND; one that reached the right replica reuses the cached KV.
  for (int turn = 0; turn < kTurns; ++turn) {
    std::shuffle(conversations.begin(), conversations.end(), rng);
    for (const Conversation& c : conversations) {
      StreamResult r = Turn(*stub, c.id, turn == 0 ? "Once upon a time" : " Then they played");
      INFO("session " << c.id << " turn " << turn << ": " << r.status.error_code() << " "
                      << r.status.error_message() << "\n"
                      << lb.AccessLog());
      REQUIRE(r.status.ok());
      if (turn == 0) {
        CHECK(r.last.usage().cached_tokens() == 0);
      } else {
        REQUIRE(r.last.usage().cached_tokens() > 0);
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    INFO("replica " << i);
    CHECK(replicas[i].Sessions() == held[i]);
    CHECK(replicas[i].GeneratesOk() == kTurns * held[i]);
  }

  // Sessionless calls: one nginx process runs one round-robin sequence, which alternates
  // between equal replicas, so ten consecutive calls split exactly. (A hash of the missing
  // header would send all ten to one replica.)
  const std::array<double, 2> before = {replicas[0].GeneratesOk(), replicas[1].GeneratesOk()};
  for (int i = 0; i < 10; ++i) {
    StreamResult r = Turn(*stub, "", "Once upon a time");
    INFO(r.status.error_message());
    REQUIRE(r.status.ok());
  }
  CHECK(replicas[0].GeneratesOk() - before[0] == 5);
  CHECK(replicas[1].GeneratesOk() - before[1] == 5);

  // Replica 0 stops (SIGTERM, the production shutdown path). Round-robin still picks it in
  // turn: nginx's connect is refused, it marks the replica failed and passes the call on
  // (grpc_next_upstream error), so every call succeeds on replica 1.
  REQUIRE(replicas[0].server->Stop() == 0);
  const double survivor_before = replicas[1].GeneratesOk();
  for (int i = 0; i < 10; ++i) {
    StreamResult r = Turn(*stub, "", "Once upon a time");
    INFO(r.status.error_message() << "\n" << lb.ErrorLog());
    REQUIRE(r.status.ok());
  }
  CHECK(replicas[1].GeneratesOk() - survivor_before == 10);
  CHECK_THAT(lb.ErrorLog(), Catch::Contains("connect() failed (111: Connection refused)"));

  // Sessions on the stopped replica: the hash still points at it, nginx fails over to replica
  // 1, which never had the session and answers NOT_FOUND: the conversation is lost and the
  // client must recreate it (not UNAVAILABLE, which would invite retrying a session that will
  // never come back on this replica set). Replica 1's sessions are untouched: consistent
  // hashing moves only the keys of the replica that left.
  for (const Conversation& c : conversations) {
    StreamResult r = Turn(*stub, c.id, " The end");
    INFO("session " << c.id << " on replica " << c.replica << ": " << r.status.error_code() << " "
                    << r.status.error_message() << "\n"
                    << lb.AccessLog());
    if (c.replica == 0) {
      CHECK(r.status.error_code() == grpc::StatusCode::NOT_FOUND);
    } else {
      REQUIRE(r.status.ok());
      CHECK(r.last.usage().cached_tokens() > 0);
    }
  }
}

}  // namespace nginx_affinity_test
}  // namespace textgen::testing
