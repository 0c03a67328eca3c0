// The OpenAI-compatible HTTP API over the engine, as routes on an httplib server:
//   GET  /                      the chat page (chat_page.html, compiled in)
//   GET  /v1/models             the served model; GET /v1/models/{id}
//   POST /v1/chat/completions   messages rendered with the chat template
//   POST /v1/completions        one prompt (text or token ids)
// Completions stream as server-sent events or answer with one JSON object (see
// completion_responder.h); errors use OpenAI's shape (api_error.h). Every request is counted
// in textgen_requests_total with its route as the method; token counts and latencies go to the
// same metrics as the gRPC API's.
//
// Until SetEngine (while the model loads) and once Drain starts, the /v1 routes answer 503.
// With API keys the /v1 routes need "Authorization: Bearer KEY" (401 in OpenAI's error shape
// otherwise, before the body is looked at); the chat page itself is static and stays open.
#ifndef TEXTGEN_SERVER_OPENAI_OPENAI_API_H_
#define TEXTGEN_SERVER_OPENAI_OPENAI_API_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "nlohmann/json.hpp"
#include "server/api_keys.h"
#include "server/openai/completion_request.h"
#include "server/openai/run_registry.h"
#include "server/pipeline/prompt_preparer.h"
#include "server/request_convert.h"
#include "server/server_metrics.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace textgen::server::openai {

class OpenAiApi {
 public:
  // Borrows `keys` and `metrics`, which must outlive the HTTP server the routes are added to.
  OpenAiApi(RequestLimits limits, const ApiKeys* keys, ServerMetrics* metrics);

  // Adds the routes, the pre-routing key check (RefuseUnauthenticated) and JSON bodies for
  // httplib's own errors (ErrorPage) and handler exceptions. httplib keeps one pre-routing and
  // one error handler per server: a listener that serves another API too (Anthropic's) installs
  // its own after this, sending these routes' requests to the two below.
  void AddRoutes(httplib::Server& http);

  // The key check before routing: with API keys, a request under /v1/ without a valid
  // "Authorization: Bearer KEY" gets 401 (written to `res`) and true; otherwise false.
  bool RefuseUnauthenticated(const httplib::Request& req, httplib::Response& res) const;
  // httplib's own errors (no such route, body too large) in OpenAI's error shape.
  static void ErrorPage(const httplib::Request& req, httplib::Response& res);

  // Serves with `engine` under the model id `model_id`, preparing prompts with `preparer` (both
  // borrowed: they must outlive the HTTP server). Without a chat template, chat completions fail
  // with the preparer's FailedPrecondition, naming --chat-template. Call once.
  void SetEngine(Engine* engine, std::string model_id, const PromptPreparer* preparer);

  // New requests get 503 from now on.
  void StopAccepting() { draining_.store(true); }
  // StopAccepting, then waits until the completions in flight finish or `deadline` passes,
  // then cancels the rest and waits (briefly) for them to end.
  void Drain(absl::Time deadline);

 private:
  struct Serving {
    Engine* engine = nullptr;
    std::string model_id;
    const PromptPreparer* preparer = nullptr;
  };
  // What one completion runs: its engine requests and how to read their answers.
  struct Prepared {
    std::vector<EngineRequest> requests;
    AnswerPlan answer;
  };

  void HandleCompletion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  // The engine requests for a parsed request, or why not (400/404/503).
  absl::StatusOr<Prepared> ToEngineRequests(const Serving& s, const CompletionRequest& r) const;
  // The engine and model, or Unavailable while loading or draining.
  absl::StatusOr<const Serving*> GetServing() const;
  // Writes an OpenAI error response and counts it.
  void ReplyError(const std::string& route, const absl::Status& status,
                  httplib::Response& res) const;

  const RequestLimits limits_;
  const ApiKeys* const keys_;
  ServerMetrics* const metrics_;
  RunRegistry runs_;
  std::atomic<const Serving*> serving_{nullptr};
  std::unique_ptr<Serving> serving_storage_;
  std::atomic<bool> draining_{false};
};

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_OPENAI_API_H_
