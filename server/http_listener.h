// One HTTP listener, bound before it serves: the metrics endpoint and the OpenAI-compatible API
// each run one. cpp-httplib parses requests and routes them; the accept loop, TLS and the
// workers are HttpFront's, which keeps idle and slow clients out of the workers (issue 15 row 8).
// Owns the address parsing, the socket options, the TLS context and the limits.
#ifndef TEXTGEN_SERVER_HTTP_LISTENER_H_
#define TEXTGEN_SERVER_HTTP_LISTENER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/tls_files.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib
struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace textgen::server {

class HttpFront;

struct HttpListenerOptions {
  // Worker threads: a request holds one while it is served (a streamed response for its whole
  // length); requests beyond wait in a queue. Idle connections hold none.
  int threads = 4;
  // A connection must deliver a whole request header within this long (after connecting, or
  // after its previous response), and the body within this long again; a client that does not
  // take what is written for this long is disconnected too.
  absl::Duration timeout = absl::Seconds(10);
  // Open connections at most; one more closes the connection that has waited longest for its
  // next request (or is refused when all are being served).
  int max_connections = 512;
  // Larger request bodies get 413.
  size_t max_body_bytes = 8u << 20;
  // Serve HTTPS with these (checked with CheckTlsFiles before); off: plain HTTP.
  TlsFiles tls;
};

class HttpListener {
 public:
  // Parses `listen` ("HOST:PORT", "[::1]:PORT"; port 0 picks a free one), lets `routes` add the
  // handlers, binds and serves. InvalidArgument for a malformed address, Unavailable if it
  // cannot be bound; both name `what` ("metrics (--metrics-listen)", "the HTTP API
  // (--http-listen)"), which should say the flag that changes the address. InvalidArgument too when
  // the TLS files cannot be used.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      const std::string& listen, const std::string& what, const HttpListenerOptions& options,
      const std::function<void(httplib::Server&)>& routes);
  // Stop().
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Stops listening, closes idle connections, waits for the requests being served; idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  struct TlsContextFree {
    void operator()(ssl_ctx_st* ctx) const;
  };

  HttpListener() = default;

  // Destroyed in reverse: the front (and its threads) first.
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<ssl_ctx_st, TlsContextFree> tls_;
  std::unique_ptr<HttpFront> front_;
  int port_ = 0;
};

// For a handler of a listener's routes (pre-routing, route or error handler), on the worker
// thread serving the request: `res` says "Connection: close" and the connection is closed once
// it is written. For a request answered before its body was read (a refused API key): the body
// is still on the connection, and a keep-alive client's next request would be parsed after it.
void CloseConnectionAfterResponse(httplib::Response& res);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_HTTP_LISTENER_H_
