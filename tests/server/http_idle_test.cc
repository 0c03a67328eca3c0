// Idle and half-open HTTP connections (connected, sending nothing or a partial request) cannot
// keep others out of /metrics or the HTTP API (issue 15 row 8).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tests/server/openai_test_util.h"

namespace textgen::testing {
namespace {

// A connection to 127.0.0.1:port that sends `bytes` (perhaps nothing) and then nothing more.
class IdleConnection {
 public:
  IdleConnection(int port, const std::string& bytes) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    if (!bytes.empty()) REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) > 0);
  }
  ~IdleConnection() { ::close(fd_); }
  IdleConnection(const IdleConnection&) = delete;
  IdleConnection& operator=(const IdleConnection&) = delete;

 private:
  int fd_ = -1;
};

// Opens `n` connections of each kind: silent ones, and ones stuck in the middle of a request.
std::vector<std::unique_ptr<IdleConnection>> OpenIdle(int port, int n) {
  std::vector<std::unique_ptr<IdleConnection>> idle;
  for (int i = 0; i < n; ++i) {
    idle.push_back(std::make_unique<IdleConnection>(port, ""));
    idle.push_back(std::make_unique<IdleConnection>(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  }
  return idle;
}

// GET `path` with a short timeout; its status and how long it took.
std::pair<int, double> TimedGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(3));
  client.set_read_timeout(std::chrono::seconds(3));
  const auto start = std::chrono::steady_clock::now();
  auto r = client.Get(path.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {r ? r->status : 0, s};
}

TEST_CASE("idle and half-open connections cannot starve /metrics or the HTTP API",
          "[server][http][metrics]") {
  // A long timeout: each idle connection holds a worker for that long.
  auto s = StartHttpServer({"--http-timeout", "30"});
  auto metrics_idle = OpenIdle(s->metrics_port, 8);  // 16 connections
  auto api_idle = OpenIdle(s->http_port, 16);        // 32
  for (int i = 0; i < 3; ++i) {
    auto [status, seconds] = TimedGet(s->metrics_port, "/metrics");
    CHECK(status == 200);
    CHECK(seconds < 2);
    auto [api_status, api_seconds] = TimedGet(s->http_port, "/v1/models");
    CHECK(api_status == 200);
    CHECK(api_seconds < 2);
  }
}

}  // namespace
}  // namespace textgen::testing
