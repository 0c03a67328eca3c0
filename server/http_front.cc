#include "server/http_front.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace textgen::server {
namespace {

using Clock = std::chrono::steady_clock;

// How long accepting pauses when the process is out of file descriptors.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);

}  // namespace

HttpFront::HttpFront(int listen_fd, SSL_CTX* tls, const HttpFrontOptions& options, ServeFn serve)
    : listen_fd_(listen_fd),
      tls_(tls),
      options_(options),
      serve_(std::move(serve)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  const int workers = std::max(1, options_.workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  front_ = std::thread([this] { FrontLoop(); });
}

HttpFront::~HttpFront() {
  Stop();
  ::close(wake_fd_);
}

void HttpFront::Stop() {
  if (!front_.joinable()) return;
  stopping_.store(true);
  Wake();
  front_.join();  // the parked connections are closed
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.clear();  // not started: closed like the parked ones
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  returned_.clear();
}

void HttpFront::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void HttpFront::FrontLoop() {
  std::vector<pollfd> fds;
  std::vector<std::list<Parked>::iterator> at;  // fds[i + 2] is *at[i]
  while (!stopping_.load()) {
    const auto now = Clock::now();
    while (!parked_.empty() && parked_.front().deadline <= now) Close(parked_.begin());
    fds.clear();
    at.clear();
    const bool accepting = now >= accept_paused_until_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    for (auto it = parked_.begin(); it != parked_.end(); ++it) {
      fds.push_back({it->conn->socket(), static_cast<short>(it->want_write ? POLLOUT : POLLIN), 0});
      at.push_back(it);
    }
    // Until the oldest parked connection's deadline (or the accept pause) ends.
    auto until = now + std::chrono::seconds(1);
    if (!parked_.empty()) until = std::min(until, parked_.front().deadline);
    if (!accepting) until = std::min(until, accept_paused_until_);
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(ms, 0))) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("HTTP listener: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[1].revents != 0) {
      uint64_t n = 0;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &n, sizeof(n));
    }
    for (size_t i = 0; i < at.size(); ++i) {
      if (fds[i + 2].revents != 0) Advance(at[i]);
    }
    TakeReturned();
    if (fds[0].revents != 0) AcceptAll();
  }
  // Refuse new connections at once rather than leave them in the kernel's queue.
  ::close(listen_fd_);
  while (!parked_.empty()) Close(parked_.begin());
}

void HttpFront::AcceptAll() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: the longest-parked connection makes room, or accepting waits.
        if (!parked_.empty()) {
          Close(parked_.begin());
          continue;
        }
        spdlog::warn("HTTP listener: cannot accept: {}", std::strerror(errno));
        accept_paused_until_ = Clock::now() + kAcceptBackoff;
      }
      return;  // EAGAIN: all taken; ECONNABORTED and the like: the next poll retries
    }
    if (open_.load() >= options_.max_connections) {
      if (parked_.empty()) {
        ::close(fd);  // every connection is being served: no room for another
        continue;
      }
      Close(parked_.begin());
    }
    // httplib writes a response's header and body (and each streamed chunk) separately: with
    // Nagle's algorithm each later write would wait for the client's delayed ACK (~40 ms).
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SSL* ssl = nullptr;
    if (tls_ != nullptr) {
      ssl = SSL_new(tls_);
      if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        ::close(fd);
        continue;
      }
      SSL_set_accept_state(ssl);
    }
    open_.fetch_add(1);
    Park(std::make_unique<HttpConnection>(fd, ssl, options_.timeout));
    // Bytes (or a TLS hello) may be there already: try at once.
    Advance(std::prev(parked_.end()));
  }
}

void HttpFront::Park(ConnPtr conn) {
  parked_.push_back({std::move(conn), Clock::now() + options_.timeout, false});
}

void HttpFront::Advance(std::list<Parked>::iterator it) {
  switch (it->conn->Advance()) {
    case HttpConnection::Progress::kWantRead:
      it->want_write = false;
      return;
    case HttpConnection::Progress::kWantWrite:
      it->want_write = true;
      return;
    case HttpConnection::Progress::kReady:
      Dispatch(std::move(it->conn));
      parked_.erase(it);
      return;
    case HttpConnection::Progress::kClosed:
      Close(it);
      return;
  }
}

void HttpFront::Close(std::list<Parked>::iterator it) {
  parked_.erase(it);  // the connection's destructor closes the socket
  open_.fetch_sub(1);
}

void HttpFront::Dispatch(ConnPtr conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(std::move(conn));
  }
  work_cv_.notify_one();
}

void HttpFront::TakeReturned() {
  std::vector<ConnPtr> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  for (ConnPtr& conn : back) {
    Park(std::move(conn));
    // A pipelined request, or TLS bytes already decrypted, would not make the socket readable.
    Advance(std::prev(parked_.end()));
  }
}

void HttpFront::WorkerLoop() {
  while (true) {
    ConnPtr conn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_.load() || !ready_.empty(); });
      if (ready_.empty()) return;  // stopping
      conn = std::move(ready_.front());
      ready_.pop_front();
    }
    conn->BeginRequest();
    const bool last =
        stopping_.load() || conn->requests_served() >= options_.max_requests_per_connection;
    bool closed = false;
    const bool ok = serve_(*conn, last, closed);
    if (!ok || closed || last || stopping_.load()) {
      conn.reset();
      open_.fetch_sub(1);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      returned_.push_back(std::move(conn));
    }
    Wake();
  }
}

}  // namespace textgen::server
