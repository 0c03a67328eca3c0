// GET /metrics over HTTP (cpp-httplib) on its own thread: Prometheus scrapes what `render`
// returns, as text format 0.0.4. Anything else is 404.
#ifndef TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_
#define TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace textgen::server {

class MetricsHttpServer {
 public:
  // Binds `listen` ("HOST:PORT"; port 0 picks a free one) and serves. InvalidArgument for a
  // malformed address, Unavailable if it cannot be bound. `render` is called on the HTTP
  // server's threads, concurrently with everything else.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, std::function<std::string()> render);
  // Stop().
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Stops listening and joins the thread; idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;
  int port_ = 0;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_METRICS_HTTP_SERVER_H_
