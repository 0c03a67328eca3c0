#include "server/probe_routes.h"

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace textgen::server {

void AddProbeRoutes(httplib::Server& http, std::function<Readiness()> readiness) {
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/ready", [readiness = std::move(readiness)](const httplib::Request&,
                                                        httplib::Response& res) {
    const Readiness r = readiness();
    res.status = r.status == "ready" ? 200 : 503;
    res.set_content(nlohmann::json{{"status", r.status}, {"state_store", r.state_store}}.dump(),
                    "application/json");
  });
}

bool IsProbeRoute(std::string_view path) { return path == "/health" || path == "/ready"; }

}  // namespace textgen::server
