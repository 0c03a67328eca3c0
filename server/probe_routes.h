// /health and /ready on the HTTP API's listener, for load balancers, Kubernetes probes and the
// inference routers in front of a fleet. Both answer without an API key (probes carry none)
// and say nothing a client could not learn from the API itself.
//   GET /health: 200 while the process answers (liveness), loading and draining included.
//   GET /ready:  200 while the model is loaded and the server takes requests; 503 while it
//                loads or drains (readiness). The body says which, and whether sessions are
//                durable: {"status": "ready"|"loading"|"draining",
//                          "state_store": "off"|"ok"|"degraded"}. A degraded store (--state-dir
//                unwritable, disk full) keeps the replica ready: it still serves, with sessions
//                in memory only, and the body and textgen_state_store_degraded say so.
#ifndef TEXTGEN_SERVER_PROBE_ROUTES_H_
#define TEXTGEN_SERVER_PROBE_ROUTES_H_

#include <functional>
#include <string>
#include <string_view>

namespace httplib {
class Server;
}

namespace textgen::server {

struct Readiness {
  std::string status;       // "ready", "loading" or "draining"
  std::string state_store;  // "off", "ok" or "degraded"
};

// Adds both routes; `readiness` is called per /ready request (from HTTP threads).
void AddProbeRoutes(httplib::Server& http, std::function<Readiness()> readiness);
// Whether `path` is one of them (they skip the API key check).
bool IsProbeRoute(std::string_view path);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PROBE_ROUTES_H_
