// One accepted HTTP connection (plain TCP or TLS) on a non-blocking socket, in two roles:
// while parked in HttpFront's poll set it is advanced without blocking (TLS handshake, bytes of
// the request header gathered into a buffer), so a silent or slow client holds no worker; once a
// whole request header has arrived a worker serves it through the httplib::Stream interface,
// reading the header from that buffer and the body from the socket, each wait bounded.
#ifndef TEXTGEN_SERVER_HTTP_CONNECTION_H_
#define TEXTGEN_SERVER_HTTP_CONNECTION_H_

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace textgen::server {

class HttpConnection : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // The most a parked connection buffers: a request header larger than this goes to a worker
  // as it is (httplib's limits apply there), and so does a body that would not fit with it.
  static constexpr size_t kMaxHeaderBytes = 64 << 10;

  // Owns `fd` (non-blocking) and `ssl` (null: plain TCP; else set up on fd, handshake pending).
  // `timeout` bounds every wait of a worker on this connection.
  HttpConnection(int fd, SSL* ssl, Clock::duration timeout);
  ~HttpConnection() override;
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  enum class Progress {
    kWantRead,   // nothing more to do until the socket is readable
    kWantWrite,  // the TLS handshake waits until the socket is writable
    kReady,      // a whole request header (and a small body) is buffered: for a worker
    kClosed,     // the client closed, reset, or failed the handshake: close it
  };
  // Never blocks: continues the TLS handshake and buffers whatever has arrived.
  Progress Advance();

  // Called by the worker before each request: its body must arrive within the timeout.
  void BeginRequest();
  int requests_served() const { return requests_served_; }

  // httplib::Stream, used by a worker.
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

 private:
  enum class Io { kData, kEof, kWantRead, kWantWrite, kError };
  // One recv/SSL_read into in_ (appending up to `max` bytes); *n = bytes read.
  Io ReadSome(size_t max, size_t* n);
  // One send/SSL_write of up to `size` bytes; *n = bytes written.
  Io WriteSome(const char* ptr, size_t size, size_t* n);
  // Waits for `events` on the socket until `deadline`; false on timeout or error.
  bool WaitFor(short events, Clock::time_point deadline) const;
  // The same for what a read or write wants (kWantRead or kWantWrite).
  bool WaitFor(Io want, Clock::time_point deadline) const;
  // Whether in_ holds the end of a request header ("\r\n\r\n"), then at header_end_;
  // remembers how far it looked.
  bool HeaderComplete();
  // The buffered header's Content-Length; 0 without one (or chunked, or unparsable).
  size_t ContentLength() const;
  // Whether a worker can start: the header is buffered, and the body when it is small.
  bool ReadyForWorker();
  size_t Buffered() const { return in_.size() - in_pos_; }

  int fd_;
  SSL* ssl_;
  bool handshake_done_;
  Clock::duration timeout_;
  Clock::time_point read_deadline_;
  std::string in_;          // bytes received and not yet consumed, from in_pos_ on
  size_t in_pos_ = 0;       // consumed prefix of in_
  size_t header_scan_ = 0;  // in_ before this offset has no header end (avoids rescans)
  size_t header_end_ = 0;   // just past the "\r\n\r\n" HeaderComplete found
  int requests_served_ = 0;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_HTTP_CONNECTION_H_
