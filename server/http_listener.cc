#include "server/http_listener.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http_front.h"

namespace textgen::server {
namespace {

constexpr int kMaxRequestsPerConnection = 100;

// Set by CloseConnectionAfterResponse during Router::Serve on the same thread.
thread_local bool close_after_response = false;

// httplib's request parsing and routing, driven by HttpFront instead of httplib's own loop.
class Router : public httplib::Server {
 public:
  bool Serve(HttpConnection& conn, bool close_connection, bool& connection_closed) {
    close_after_response = false;
    const bool ok = process_request(conn, close_connection, connection_closed, nullptr);
    if (close_after_response) connection_closed = true;
    close_after_response = false;
    return ok;
  }
  // The socket bind_to_port made: HttpFront accepts on it (and closes it) instead of
  // listen_after_bind. httplib still reads svr_sock_: streamed responses run while it is valid.
  int ListenSocket() const { return svr_sock_.load(); }
  // Ends the streamed responses in flight at their next chunk, as httplib's stop() would.
  void EndStreams() { svr_sock_.store(INVALID_SOCKET); }
};

// What httplib::SSLServer would set up (TLS 1.2 at least here); with a client CA, clients must
// present a certificate it signed (mutual TLS). Null if the files cannot be used.
SSL_CTX* NewTlsContext(const TlsFiles& tls) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Writes resume from wherever the worker's buffer is after a wait.
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  bool ok = SSL_CTX_use_certificate_chain_file(ctx, tls.cert.c_str()) == 1 &&
            SSL_CTX_use_PrivateKey_file(ctx, tls.key.c_str(), SSL_FILETYPE_PEM) == 1 &&
            SSL_CTX_check_private_key(ctx) == 1;
  if (ok && !tls.client_ca.empty()) {
    ok = SSL_CTX_load_verify_locations(ctx, tls.client_ca.c_str(), nullptr) == 1;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  if (!ok) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    const std::string& listen, const std::string& what, const HttpListenerOptions& options,
    const std::function<void(httplib::Server&)>& routes) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " address must be HOST:PORT, got \"", listen, "\""));
  }
  std::string host = listen.substr(0, colon);
  // [::1]:9090 -> ::1 (what getaddrinfo takes).
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }

  auto s = std::unique_ptr<HttpListener>(new HttpListener());
  if (options.tls.enabled()) {
    s->tls_.reset(NewTlsContext(options.tls));
    if (s->tls_ == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": cannot set up TLS with --tls-cert ",
                                                     options.tls.cert, " and --tls-key ",
                                                     options.tls.key));
    }
  }
  auto router = std::make_unique<Router>();
  router->set_payload_max_length(options.max_body_bytes);
  // Only for the Keep-Alive header httplib writes: HttpFront enforces both.
  router->set_keep_alive_timeout(
      static_cast<time_t>(std::max<int64_t>(1, absl::ToInt64Seconds(options.timeout))));
  router->set_keep_alive_max_count(kMaxRequestsPerConnection);
  routes(*router);
  // httplib's default adds SO_REUSEPORT, which would let a second server share the port
  // silently (requests alternating between them); keep only SO_REUSEADDR for quick restarts.
  router->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (port == 0) {
    s->port_ = router->bind_to_any_port(host);
  } else if (router->bind_to_port(host, port)) {
    s->port_ = port;
  }
  const int listen_fd = router->ListenSocket();
  if (s->port_ <= 0 || listen_fd < 0) {
    if (listen_fd >= 0) ::close(listen_fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, " for ", what,
                                               ": the port is in use or the address is not this "
                                               "host's; choose another"));
  }
  ::fcntl(listen_fd, F_SETFL, ::fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  // httplib listens with a backlog of 5: a burst of connects beyond it would wait a SYN retry
  // (a second) each; the front accepts them all at once, so let the kernel queue them.
  ::listen(listen_fd, SOMAXCONN);

  HttpFrontOptions front;
  front.workers = options.threads;
  front.timeout = absl::ToChronoMicroseconds(options.timeout);
  front.max_connections = std::max(1, options.max_connections);
  front.max_requests_per_connection = kMaxRequestsPerConnection;
  s->front_ = std::make_unique<HttpFront>(
      listen_fd, s->tls_.get(), front,
      [r = router.get()](HttpConnection& conn, bool close_connection, bool& connection_closed) {
        return r->Serve(conn, close_connection, connection_closed);
      });
  s->http_ = std::move(router);
  return s;
}

void CloseConnectionAfterResponse(httplib::Response& res) {
  res.set_header("Connection", "close");
  close_after_response = true;
}

void HttpListener::TlsContextFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Stop() {
  if (front_ == nullptr) return;
  static_cast<Router*>(http_.get())->EndStreams();
  front_->Stop();
}

}  // namespace textgen::server
