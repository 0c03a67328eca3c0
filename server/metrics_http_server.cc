#include "server/metrics_http_server.h"

#include <httplib.h>

#include <utility>

#include "engine/util/status_macros.h"

namespace textgen::server {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, const HttpListenerOptions& options,
    std::function<std::string()> render) {
  auto routes = [render = std::move(render)](httplib::Server& http) {
    http.Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
      res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
    });
  };
  TG_ASSIGN_OR_RETURN(std::unique_ptr<HttpListener> listener,
                      HttpListener::Start(listen, "metrics (--metrics-listen)", options, routes));
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(listener)));
}

}  // namespace textgen::server
