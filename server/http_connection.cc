#include "server/http_connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace textgen::server {
namespace {

constexpr size_t kReadChunk = 16 << 10;  // one TLS record at most

// The address getpeername or getsockname (`name`) reports for `fd`, as text and a port.
void AddressOf(int fd, int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (name(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

}  // namespace

HttpConnection::HttpConnection(int fd, SSL* ssl, Clock::duration timeout)
    : fd_(fd), ssl_(ssl), handshake_done_(ssl == nullptr), timeout_(timeout) {}

HttpConnection::~HttpConnection() {
  if (ssl_ != nullptr) {
    // A close_notify when it can go out at once; the socket is closed either way.
    if (handshake_done_) SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
}

HttpConnection::Progress HttpConnection::Advance() {
  if (!handshake_done_) {
    ERR_clear_error();
    const int r = SSL_accept(ssl_);
    if (r != 1) {
      const int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_WANT_READ) return Progress::kWantRead;
      if (e == SSL_ERROR_WANT_WRITE) return Progress::kWantWrite;
      return Progress::kClosed;  // not TLS, no client certificate, or not one we trust
    }
    handshake_done_ = true;
  }
  while (!ReadyForWorker()) {
    size_t n = 0;
    switch (ReadSome(kReadChunk, &n)) {
      case Io::kData:
        break;
      case Io::kWantRead:
        return Progress::kWantRead;
      case Io::kWantWrite:
        return Progress::kWantWrite;
      case Io::kEof:
      case Io::kError:
        return Progress::kClosed;
    }
  }
  return Progress::kReady;
}

bool HttpConnection::HeaderComplete() {
  const size_t from = std::max(in_pos_, header_scan_);
  const size_t at = in_.find("\r\n\r\n", from >= in_pos_ + 3 ? from - 3 : in_pos_);
  if (at == std::string::npos) {
    header_scan_ = in_.size();
    return false;
  }
  header_end_ = at + 4;
  return true;
}

size_t HttpConnection::ContentLength() const {
  static constexpr std::string_view kName = "\r\ncontent-length:";
  const auto header = std::string_view(in_).substr(in_pos_, header_end_ - in_pos_);
  const auto it = std::search(header.begin(), header.end(), kName.begin(), kName.end(),
                              [](char a, char b) { return absl::ascii_tolower(a) == b; });
  if (it == header.end()) return 0;
  const size_t from = static_cast<size_t>(it - header.begin()) + kName.size();
  size_t n = 0;
  // Unparsable: 0 here, and httplib refuses the request.
  const std::string_view value = header.substr(from, header.find('\r', from) - from);
  if (!absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &n)) return 0;
  return n;
}

bool HttpConnection::ReadyForWorker() {
  if (!HeaderComplete()) return Buffered() >= kMaxHeaderBytes;
  // A small body is gathered here too, so a client trickling it cannot hold a worker either.
  const size_t need = header_end_ - in_pos_ + ContentLength();
  return need > kMaxHeaderBytes || Buffered() >= need;
}

void HttpConnection::BeginRequest() {
  read_deadline_ = Clock::now() + timeout_;
  ++requests_served_;
  // What the last request left unread (pipelined bytes) moves to the front of the buffer.
  in_.erase(0, in_pos_);
  in_pos_ = 0;
  header_scan_ = 0;
}

HttpConnection::Io HttpConnection::ReadSome(size_t max, size_t* n) {
  const size_t old = in_.size();
  in_.resize(old + max);
  Io io = Io::kError;
  if (ssl_ == nullptr) {
    const ssize_t r = ::recv(fd_, in_.data() + old, max, 0);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      io = Io::kData;
    } else if (r == 0) {
      io = Io::kEof;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      io = Io::kWantRead;
    }
  } else {
    ERR_clear_error();
    const int r = SSL_read(ssl_, in_.data() + old, static_cast<int>(max));
    if (r > 0) {
      *n = static_cast<size_t>(r);
      io = Io::kData;
    } else {
      const int e = SSL_get_error(ssl_, r);
      io = e == SSL_ERROR_WANT_READ     ? Io::kWantRead
           : e == SSL_ERROR_WANT_WRITE  ? Io::kWantWrite
           : e == SSL_ERROR_ZERO_RETURN ? Io::kEof
                                        : Io::kError;
    }
  }
  in_.resize(old + (io == Io::kData ? *n : 0));
  return io;
}

HttpConnection::Io HttpConnection::WriteSome(const char* ptr, size_t size, size_t* n) {
  if (ssl_ == nullptr) {
    const ssize_t r = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (r >= 0) {
      *n = static_cast<size_t>(r);
      return Io::kData;
    }
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Io::kWantWrite : Io::kError;
  }
  ERR_clear_error();
  const int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  if (r > 0) {
    *n = static_cast<size_t>(r);
    return Io::kData;
  }
  const int e = SSL_get_error(ssl_, r);
  return e == SSL_ERROR_WANT_WRITE  ? Io::kWantWrite
         : e == SSL_ERROR_WANT_READ ? Io::kWantRead
                                    : Io::kError;
}

bool HttpConnection::WaitFor(Io want, Clock::time_point deadline) const {
  return WaitFor(want == Io::kWantRead ? POLLIN : POLLOUT, deadline);
}

bool HttpConnection::WaitFor(short events, Clock::time_point deadline) const {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (r > 0) return true;  // ready, or an error the next read / write reports
    if (r < 0 && errno != EINTR) return false;
  }
}

bool HttpConnection::is_readable() const {
  if (Buffered() > 0 || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
  return WaitFor(POLLIN, std::min(read_deadline_, Clock::now() + timeout_));
}

bool HttpConnection::is_writable() const {
  pollfd p{fd_, POLLOUT, 0};
  const int ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count());
  if (::poll(&p, 1, ms) <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return false;
  // A client that closed its end (EOF waiting to be read) is gone too, as httplib judges it: a
  // streamed answer stops at once instead of at its next failed write.
  char c;
  const ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

ssize_t HttpConnection::read(char* ptr, size_t size) {
  while (Buffered() == 0) {
    in_.clear();
    in_pos_ = 0;
    header_scan_ = 0;
    size_t n = 0;
    // Each wait is bounded by the timeout, and the request as a whole by its deadline: a body
    // trickling in cannot hold the worker for longer.
    const auto deadline = std::min(read_deadline_, Clock::now() + timeout_);
    const Io io = ReadSome(kReadChunk, &n);
    if (io == Io::kEof) return 0;
    if (io == Io::kError || (io != Io::kData && !WaitFor(io, deadline))) return -1;
  }
  const size_t n = std::min(size, Buffered());
  std::memcpy(ptr, in_.data() + in_pos_, n);
  in_pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t HttpConnection::write(const char* ptr, size_t size) {
  size_t done = 0;
  auto deadline = Clock::now() + timeout_;
  while (done < size) {
    size_t n = 0;
    const Io io = WriteSome(ptr + done, size - done, &n);
    if (io == Io::kData) {
      done += n;
      deadline = Clock::now() + timeout_;  // the client is taking what is written
    } else if (io == Io::kEof || io == Io::kError || !WaitFor(io, deadline)) {
      return -1;
    }
  }
  return static_cast<ssize_t>(size);
}

void HttpConnection::get_remote_ip_and_port(std::string& ip, int& port) const {
  AddressOf(fd_, ::getpeername, ip, port);
}

void HttpConnection::get_local_ip_and_port(std::string& ip, int& port) const {
  AddressOf(fd_, ::getsockname, ip, port);
}

}  // namespace textgen::server
