#include "server/http_listener.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace textgen::server {

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
    // With a client CA, httplib requires and verifies a client certificate (mutual TLS).
    auto https = std::make_unique<httplib::SSLServer>(
        options.tls.cert.c_str(), options.tls.key.c_str(),
        options.tls.client_ca.empty() ? nullptr : options.tls.client_ca.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": cannot set up TLS with --tls-cert ",
                                                     options.tls.cert, " and --tls-key ",
                                                     options.tls.key));
    }
    s->http_ = std::move(https);
  } else {
    s->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *s->http_;
  const int threads = options.threads < 1 ? 1 : options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  const auto timeout = absl::ToChronoMicroseconds(options.timeout);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  http.set_keep_alive_timeout(
      static_cast<time_t>(std::max<int64_t>(1, absl::ToInt64Seconds(options.timeout))));
  http.set_payload_max_length(options.max_body_bytes);
  routes(http);
  // httplib's default adds SO_REUSEPORT, which would let a second server share the port
  // silently (requests alternating between them); keep only SO_REUSEADDR for quick restarts.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (port == 0) {
    s->port_ = http.bind_to_any_port(host);
  } else if (http.bind_to_port(host, port)) {
    s->port_ = port;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, " for ", what));
  }
  s->thread_ = std::thread([http = s->http_.get(), done = &s->listen_returned_] {
    http->listen_after_bind();
    done->store(true);
  });
  return s;
}

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until the listen loop has started (it would then never
  // end): wait for it to run, or to have returned on its own.
  while (!http_->is_running() && !listen_returned_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  http_->stop();
  thread_.join();
}

}  // namespace textgen::server
