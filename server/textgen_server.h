// The running server: the engine, the TextGeneration service, the standard health service and
// reflection on one gRPC server, plus the optional metrics endpoint and the optional HTTP API
// (OpenAI-compatible routes with the chat page, and Anthropic's Messages API, on one listener)
// on the same engine. It listens before the model
// is loaded so that probes see it loading (NOT_SERVING) rather than refused connections.
// Shutdown order matters: the gRPC server and the HTTP API first (their streams reference the
// engine), the metrics endpoint (it reads the engine's stats), then the engine.
#ifndef TEXTGEN_SERVER_TEXTGEN_SERVER_H_
#define TEXTGEN_SERVER_TEXTGEN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "server/anthropic/anthropic_api.h"
#include "server/api_keys.h"
#include "server/http_listener.h"
#include "server/metrics_http_server.h"
#include "server/openai/openai_api.h"
#include "server/pipeline/prompt_preparer.h"
#include "server/probe_routes.h"
#include "server/server_metrics.h"
#include "server/server_options.h"
#include "server/text_generation_service.h"

namespace textgen::server {

class TextgenServer {
 public:
  // Starts listening (gRPC, and the metrics endpoint if options.metrics_listen is set) in the
  // loading state: health NOT_SERVING, TextGeneration RPCs UNAVAILABLE. Unavailable if an
  // address cannot be bound; InvalidArgument (naming the flag) for unusable TLS files or API
  // keys file. Warns about listeners reachable from other hosts without TLS or keys.
  static absl::StatusOr<std::unique_ptr<TextgenServer>> Start(const ServerOptions& options);
  // Shutdown(zero grace) if not done yet.
  ~TextgenServer();
  TextgenServer(const TextgenServer&) = delete;
  TextgenServer& operator=(const TextgenServer&) = delete;

  // Loads the model and starts the engine (blocking), without serving it yet: RPCs stay
  // UNAVAILABLE and health NOT_SERVING. Engine errors as they come. Call once.
  absl::Status Load();
  // After a successful Load: serves the loaded engine (health SERVING). Separate from Load so
  // that the thread taking signals decides alone, with no window in between, whether a SIGTERM
  // came before serving (exit at once: nothing is in flight) or after it (drain). Call once,
  // from the thread that calls Shutdown.
  void Serve();

  // Health NOT_SERVING (load balancers stop sending), stop accepting calls, let in-flight ones
  // run until `grace` has passed and cancel the rest, then stop the engine.
  void Shutdown(absl::Duration grace);

  // The ports actually bound (useful with port 0); metrics_port() is 0 without the endpoint.
  int port() const { return port_; }
  int metrics_port() const { return metrics_http_ != nullptr ? metrics_http_->port() : 0; }
  int http_port() const { return api_http_ != nullptr ? api_http_->port() : 0; }
  // True while sessions cannot be made durable: --state-dir was given but cannot be written
  // (unwritable, full disk); they are then kept in memory only. False without --state-dir.
  // Thread-safe (for a readiness probe).
  bool state_store_degraded() const { return journal_ != nullptr && journal_->degraded(); }
  // What GET /ready answers (probe_routes.h). Thread-safe.
  Readiness readiness() const;

 private:
  enum class State { kLoading, kServing, kDraining };

  explicit TextgenServer(const ServerOptions& options);
  // Loads the chat template once for the Chat RPC and the HTTP API's chat completions (and
  // hands the engine to the HTTP API): an unusable --chat-template file is an error; a model
  // without a (usable) template of its own only leaves chat requests refused.
  absl::Status SetUpChat(Engine& engine);
  // The one place that decides what the health service and the metrics report.
  void SetState(State state);

  const ServerOptions options_;
  // With --state-dir: where sessions are kept (shared with the engine, which goes first).
  std::shared_ptr<SessionJournal> journal_;
  ApiKeys api_keys_;  // none: open
  ServerMetrics metrics_;
  // Chat rendering and output constraints for both APIs (set by SetUpChat; outlives them).
  std::unique_ptr<PromptPreparer> preparer_;
  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<openai::OpenAiApi> api_;
  std::unique_ptr<anthropic::AnthropicApi> anthropic_;  // on the same listener as api_
  std::unique_ptr<HttpListener> api_http_;
  // Read by metrics scrapes on the HTTP threads; set by Load, cleared before it is destroyed.
  absl::Mutex engine_mu_;
  std::unique_ptr<Engine> engine_ ABSL_GUARDED_BY(engine_mu_);
  std::unique_ptr<Engine> loaded_engine_;  // from Load to Serve
  int port_ = 0;
  bool shut_down_ = false;
  std::atomic<State> state_{State::kLoading};  // SetState's, for readiness()
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_TEXTGEN_SERVER_H_
