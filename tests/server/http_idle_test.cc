// Idle, half-open and slow HTTP connections (connected and silent, half a request, a request
// header trickling in byte by byte, kept alive after one request) cannot keep others out of
// /metrics or the HTTP API, and each is closed after --http-timeout (issue 15 row 8).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/openai_test_util.h"
#include "tests/server/tls_test_util.h"

namespace textgen::testing {
namespace http_idle_test {

using Clock = std::chrono::steady_clock;

// Connected and silent; half a request; a header trickling in; a body trickling in; kept
// alive, silent after one request.
enum class Kind { kSilent, kHalfRequest, kTrickle, kSlowBody, kKeptAlive };
constexpr Kind kKinds[] = {Kind::kSilent, Kind::kHalfRequest, Kind::kTrickle, Kind::kSlowBody,
                           Kind::kKeptAlive};

// A raw client connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void Send(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

  // Reads one HTTP response (with a Content-Length) within `timeout`; its status, 0 if none.
  // What follows it stays buffered for the next call.
  int ReadResponse(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    size_t header_end = std::string::npos;
    size_t need = 0;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos || in_.size() < need) {
      if (header_end != std::string::npos && need == 0) {
        const size_t at = in_.find("Content-Length: ");
        if (at == std::string::npos || at > header_end) return 0;
        need = header_end + 4 + std::stoul(in_.substr(at + 16));
        continue;
      }
      if (!ReadSome(deadline, &in_)) return 0;
    }
    const int status = std::stoi(in_.substr(9, 3));
    in_.erase(0, need);
    return status;
  }

  // Whether the server closes (or resets) the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string ignored;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      if (::recv(fd_, buf, sizeof(buf), 0) <= 0) return true;
    }
    return false;
  }

 private:
  // Appends what arrives before `deadline`; false on timeout or close.
  bool ReadSome(Clock::time_point deadline, std::string* in) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in->append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string in_;  // received, not yet read as a response
};

// Bad connections of every kind, `n` each, to `port`; the trickling ones are fed one byte of a
// never-ending header every 200 ms until destruction.
class BadClients {
 public:
  BadClients(int port, int n, const std::string& path) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\n";
    for (Kind kind : kKinds) {
      for (int i = 0; i < n; ++i) {
        auto c = std::make_unique<RawConnection>(port);
        if (kind == Kind::kHalfRequest) c->Send(request);
        if (kind == Kind::kTrickle) c->Send(request + "X-Slow: ");
        if (kind == Kind::kSlowBody) c->Send(request + "Content-Length: 4000\r\n\r\n");
        if (kind == Kind::kKeptAlive) {
          c->Send(request + "\r\n");
          CHECK(c->ReadResponse(std::chrono::seconds(5)) == 200);
        }
        conns_.push_back({kind, std::move(c)});
      }
    }
    trickle_ = std::thread([this] {
      while (!stop_.load()) {
        for (auto& [kind, c] : conns_) {
          if (kind == Kind::kTrickle || kind == Kind::kSlowBody) c->Send("a");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  ~BadClients() {
    stop_.store(true);
    trickle_.join();
  }
  BadClients(const BadClients&) = delete;
  BadClients& operator=(const BadClients&) = delete;

  // How many of `kind` the server has closed by `deadline` (each waited for in turn).
  int ClosedBy(Kind kind, Clock::time_point deadline) {
    int closed = 0;
    for (auto& [k, c] : conns_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (k == kind && c->ClosedWithin(std::max(left, std::chrono::milliseconds(1)))) ++closed;
    }
    return closed;
  }

 private:
  std::vector<std::pair<Kind, std::unique_ptr<RawConnection>>> conns_;
  std::atomic<bool> stop_{false};
  std::thread trickle_;
};

// `fetch` must answer 200 within `limit` seconds.
template <typename Fetch>
void AnswersQuickly(const std::string& what, double limit, Fetch fetch) {
  const auto start = Clock::now();
  const int status = fetch();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(what << ": status " << status << " after " << s << " s");
  CHECK(status == 200);
  CHECK(s < limit);
}

int TimedGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(5));
  auto r = client.Get(path.c_str());
  return r ? r->status : 0;
}

int TimedCompletion(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(5));
  const std::string body = R"({"prompt": "Once upon", "max_tokens": 2})";
  auto r = client.Post("/v1/completions", body, "application/json");
  return r ? r->status : 0;
}

int OpenFds(pid_t pid) {
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  REQUIRE(dir != nullptr);
  int n = 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n - 2;  // . and ..
}

// The server's descriptors once the connections of earlier requests are closed (the server
// notices a client's close asynchronously).
int SettledFds(pid_t pid) {
  int last = OpenFds(pid);
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int now = OpenFds(pid);
    if (now == last) break;
    last = now;
  }
  return last;
}

// The server's descriptors come back to `before` (within a few seconds: closes are async).
void NoFdLeak(pid_t pid, int before) {
  int now = OpenFds(pid);
  for (int i = 0; i < 50 && now > before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = OpenFds(pid);
  }
  CHECK(now <= before);
}

constexpr int kWorkers = 4;

TEST_CASE("idle, half-open, trickling and kept-alive connections cannot starve the HTTP API",
          "[server][http][metrics]") {
  // A long timeout: on a listener where each connection holds a worker, these would hold them.
  auto s = StartHttpServer({"--http-timeout", "30", "--http-threads", std::to_string(kWorkers)});
  // 12 of each kind, 60 per listener: 3x the API's workers (and more than the 32 workers the
  // metrics listener once had).
  BadClients metrics_bad(s->metrics_port, 3 * kWorkers, "/metrics");
  BadClients api_bad(s->http_port, 3 * kWorkers, "/v1/models");
  for (int i = 0; i < 3; ++i) {
    AnswersQuickly("/metrics", 2, [&] { return TimedGet(s->metrics_port, "/metrics"); });
    AnswersQuickly("/v1/models", 2, [&] { return TimedGet(s->http_port, "/v1/models"); });
    AnswersQuickly("a completion", 3, [&] { return TimedCompletion(s->http_port); });
  }
}

TEST_CASE("every kind of idle or slow HTTP connection is closed after --http-timeout",
          "[server][http][metrics]") {
  auto s = StartHttpServer({"--http-timeout", "2", "--http-threads", std::to_string(kWorkers)});
  REQUIRE(TimedGet(s->metrics_port, "/metrics") == 200);
  REQUIRE(TimedGet(s->http_port, "/v1/models") == 200);
  const pid_t pid = s->process->pid();
  const int fds_before = SettledFds(pid);
  {
    BadClients metrics_bad(s->metrics_port, 3 * kWorkers, "/metrics");
    BadClients api_bad(s->http_port, 3 * kWorkers, "/v1/models");
    CHECK(OpenFds(pid) >= fds_before + 2 * 5 * 3 * kWorkers);
    // 2 s after the last one opened, and slack for a loaded machine.
    const auto deadline = Clock::now() + std::chrono::seconds(6);
    for (Kind kind : kKinds) {
      INFO("kind " << static_cast<int>(kind));
      CHECK(metrics_bad.ClosedBy(kind, deadline) == 3 * kWorkers);
      CHECK(api_bad.ClosedBy(kind, deadline) == 3 * kWorkers);
    }
  }
  NoFdLeak(pid, fds_before);
  CHECK(TimedGet(s->metrics_port, "/metrics") == 200);
}

TEST_CASE("a kept-alive connection serves request after request, pipelined ones too",
          "[server][http][metrics]") {
  auto s = StartHttpServer({"--http-threads", "1"});
  RawConnection c(s->http_port);
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string post =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 40\r\n\r\n{\"prompt\": \"Once upon\", \"max_tokens\": 2}";
  for (int i = 0; i < 3; ++i) {
    c.Send(get);
    CHECK(c.ReadResponse(std::chrono::seconds(5)) == 200);
  }
  c.Send(get + post + get);  // three in one write
  for (int i = 0; i < 3; ++i) CHECK(c.ReadResponse(std::chrono::seconds(5)) == 200);
  // Split anywhere, the same.
  for (const std::string& part : {post.substr(0, 20), post.substr(20, 60), post.substr(80)}) {
    c.Send(part);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(c.ReadResponse(std::chrono::seconds(5)) == 200);
}

TEST_CASE("beyond --http-max-connections the longest-idle connection is closed",
          "[server][http][metrics]") {
  auto s = StartHttpServer({"--http-timeout", "30", "--http-max-connections", "16"});
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawConnection>(s->metrics_port));
  AnswersQuickly("/metrics", 2, [&] { return TimedGet(s->metrics_port, "/metrics"); });
  // The first 25 made room for later ones (the 40 + the GET, 16 open at most).
  for (int i = 0; i < 25; ++i) CHECK(idle[i]->ClosedWithin(std::chrono::seconds(2)));
  // The newest are still open.
  for (int i = 30; i < 40; ++i) CHECK_FALSE(idle[i]->ClosedWithin(std::chrono::milliseconds(50)));
}

TEST_CASE("silent and half-handshake TLS connections cannot starve the HTTPS listeners",
          "[server][http][tls]") {
  ::signal(SIGPIPE, SIG_IGN);
  TestCerts c = MakeTestCerts();
  auto s = StartTlsServer(c, {"--http-timeout", "30", "--http-threads", std::to_string(kWorkers)});
  const pid_t pid = s->process->pid();
  auto https_get = [&](int port, const std::string& path) {
    httplib::SSLClient client("127.0.0.1", port);
    client.set_ca_cert_path(c.server_cert.c_str());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(std::chrono::seconds(5));
    client.set_read_timeout(std::chrono::seconds(5));
    auto r = client.Get(path.c_str());
    return r ? r->status : 0;
  };
  REQUIRE(https_get(s->metrics_port, "/metrics") == 200);
  const int fds_before = SettledFds(pid);
  {
    // No ClientHello at all, and the first bytes of a TLS record and no more: 48 of each, more
    // than the metrics listener's 32 workers of old.
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int port : {s->metrics_port, s->http_port}) {
      for (int i = 0; i < 12 * kWorkers; ++i) {
        idle.push_back(std::make_unique<RawConnection>(port));
        if (i % 2 == 1) idle.back()->Send(std::string("\x16\x03\x01\x02", 4));
      }
    }
    for (int i = 0; i < 2; ++i) {
      AnswersQuickly("https /metrics", 2, [&] { return https_get(s->metrics_port, "/metrics"); });
      AnswersQuickly("https /v1/models", 2, [&] { return https_get(s->http_port, "/v1/models"); });
    }
  }
  NoFdLeak(pid, fds_before);
}

}  // namespace http_idle_test
}  // namespace textgen::testing
