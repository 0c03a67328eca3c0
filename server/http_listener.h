// One cpp-httplib server on its own accept thread, bound before it serves: the metrics endpoint
// and the OpenAI-compatible API each run one. Owns the address parsing, the socket options and
// the bounded worker pool and timeouts that keep slow or idle clients from holding the listener.
#ifndef TEXTGEN_SERVER_HTTP_LISTENER_H_
#define TEXTGEN_SERVER_HTTP_LISTENER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/tls_files.h"

namespace httplib {
class Server;
}

namespace textgen::server {

struct HttpListenerOptions {
  // Worker threads: each connection holds one while it is served (a streamed response for its
  // whole length); connections beyond wait in httplib's queue.
  int threads = 4;
  // A client that sends nothing for this long (mid-request, or idle on a kept-alive
  // connection), or does not take what is written for this long, is disconnected and frees its
  // worker.
  absl::Duration timeout = absl::Seconds(10);
  // Larger request bodies get 413.
  size_t max_body_bytes = 8u << 20;
  // Serve HTTPS with these (checked with CheckTlsFiles before); off: plain HTTP.
  TlsFiles tls;
};

class HttpListener {
 public:
  // Parses `listen` ("HOST:PORT", "[::1]:PORT"; port 0 picks a free one), lets `routes` add the
  // handlers, binds and serves. InvalidArgument for a malformed address, Unavailable if it
  // cannot be bound; both name `what` ("metrics", "the HTTP API"). InvalidArgument too when
  // the TLS files cannot be used.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      const std::string& listen, const std::string& what, const HttpListenerOptions& options,
      const std::function<void(httplib::Server&)>& routes);
  // Stop().
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Stops listening, waits for the requests being served, joins the thread; idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  HttpListener() = default;

  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
  int port_ = 0;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_HTTP_LISTENER_H_
