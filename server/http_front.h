// The accept loop and worker pool of an HTTP listener, in place of cpp-httplib's own (which hands
// every accepted socket to a worker at once, so idle clients could occupy all of them).
//
// One front thread accepts connections and keeps every connection that is not being served in
// a poll set: new ones, and kept-alive ones between requests. There it finishes the TLS
// handshake and gathers the request header (and a small body: HttpConnection::kMaxHeaderBytes
// in all) without blocking; only a connection whose request has arrived goes to a worker. A
// parked connection that has not delivered it within `timeout` (after connecting or after its
// previous response) is closed, so a silent, half-open or trickling (slowloris) client holds a
// socket for at most that long and a worker never. At `max_connections` open, a new connection
// closes the longest-parked one.
#ifndef TEXTGEN_SERVER_HTTP_FRONT_H_
#define TEXTGEN_SERVER_HTTP_FRONT_H_

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/http_connection.h"

namespace textgen::server {

struct HttpFrontOptions {
  int workers = 4;
  std::chrono::steady_clock::duration timeout = std::chrono::seconds(10);
  int max_connections = 512;
  // Requests served on one connection before the server closes it.
  int max_requests_per_connection = 100;
};

class HttpFront {
 public:
  // Serves one request from the connection; `close_connection`: answer with
  // "Connection: close". Returns false (or sets connection_closed) when the connection must
  // not be reused. Called on worker threads, concurrently.
  using ServeFn =
      std::function<bool(HttpConnection& conn, bool close_connection, bool& connection_closed)>;

  // Takes `listen_fd` (bound, listening, non-blocking; closed at Stop()) and serves it until
  // Stop(). `tls` (not owned, may be null for plain HTTP) must outlive this.
  HttpFront(int listen_fd, SSL_CTX* tls, const HttpFrontOptions& options, ServeFn serve);
  // Stop().
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Stops accepting, closes the idle connections, lets the workers finish the requests they
  // are serving, joins the threads; idempotent.
  void Stop();

 private:
  using ConnPtr = std::unique_ptr<HttpConnection>;
  struct Parked {
    ConnPtr conn;
    std::chrono::steady_clock::time_point deadline;  // for a complete request header
    bool want_write = false;                         // the TLS handshake waits to write
  };

  void FrontLoop();
  void AcceptAll();
  // Advances parked connection `it`; hands it to a worker, or closes it, when due.
  void Advance(std::list<Parked>::iterator it);
  void Park(ConnPtr conn);
  void Close(std::list<Parked>::iterator it);
  void Dispatch(ConnPtr conn);
  // Moves the connections the workers gave back into the poll set.
  void TakeReturned();
  void WorkerLoop();
  void Wake();

  const int listen_fd_;
  SSL_CTX* const tls_;
  const HttpFrontOptions options_;
  const ServeFn serve_;
  const int wake_fd_;  // eventfd: a worker gave a connection back, or Stop()

  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};  // connections accepted and not yet closed
  // Front thread only: oldest first, so deadlines are in order too.
  std::list<Parked> parked_;
  std::chrono::steady_clock::time_point accept_paused_until_{};

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<ConnPtr> ready_;      // guarded by mu_: whole header buffered, for a worker
  std::vector<ConnPtr> returned_;  // guarded by mu_: served, kept alive, for the front
  std::thread front_;
  std::vector<std::thread> workers_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_HTTP_FRONT_H_
