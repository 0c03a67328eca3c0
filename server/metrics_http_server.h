// GET /metrics over HTTP (cpp-httplib) on its own thread: Prometheus scrapes what `render`
// returns, as text format 0.0.4. Anything else is 404.
#ifndef TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_
#define TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "server/http_listener.h"

namespace textgen::server {

class MetricsHttpServer {
 public:
  // Binds `listen` ("HOST:PORT"; port 0 picks a free one) and serves, over HTTPS when
  // options.tls is set. InvalidArgument for a malformed address, Unavailable if it cannot be
  // bound. `render` is called on the HTTP server's threads, concurrently with everything else.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, const HttpListenerOptions& options,
      std::function<std::string()> render);
  ~MetricsHttpServer() { Stop(); }
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Stops listening and joins the thread; idempotent.
  void Stop() { listener_->Stop(); }
  int port() const { return listener_->port(); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpListener> listener)
      : listener_(std::move(listener)) {}

  std::unique_ptr<HttpListener> listener_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_
