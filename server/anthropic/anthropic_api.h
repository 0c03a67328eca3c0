// Anthropic's Messages API over the engine, as routes on the HTTP API's httplib server (beside
// the OpenAI-compatible routes, through the same pipeline):
//   POST /v1/messages               a conversation rendered with the chat template; the answer
//                                   as content blocks (thinking, text, tool_use), streamed as
//                                   Anthropic's events or whole (messages_responder.h)
//   POST /v1/messages/count_tokens  {"input_tokens": the rendered prompt's length, tools in}
// Requests are parsed by messages_request.h (every field applied or refused by name); errors
// use Anthropic's shape (anthropic_error.h). Every request is counted in textgen_requests_total
// with its route as the method; token counts and latencies go to the same metrics as the other
// APIs'.
//
// Until SetEngine (while the model loads) and once Drain starts, the routes answer 503
// (overloaded_error). With API keys the routes need "x-api-key: KEY" (Anthropic's header) or
// "authorization: Bearer KEY": 401 authentication_error otherwise, before the body is looked at.
// httplib has one pre-routing and one error handler per server: the listener's owner installs
// them and sends this API's paths (Serves) to RefuseUnauthenticated and ErrorPage.
#ifndef TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_API_H_
#define TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_API_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "server/anthropic/messages_request.h"
#include "server/api_keys.h"
#include "server/openai/run_registry.h"
#include "server/pipeline/prompt_preparer.h"
#include "server/request_convert.h"
#include "server/server_metrics.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace textgen::server::anthropic {

class AnthropicApi {
 public:
  // Borrows `keys` and `metrics`, which must outlive the HTTP server the routes are added to.
  AnthropicApi(RequestLimits limits, const ApiKeys* keys, ServerMetrics* metrics);

  // Whether `path` is this API's: /v1/messages and everything under it.
  static bool Serves(std::string_view path);

  // Adds the two routes (not the pre-routing or error handlers: see above).
  void AddRoutes(httplib::Server& http);

  // The pre-routing check for this API's paths: with API keys, a request without a valid key
  // gets 401 authentication_error (written to `res`) and true; otherwise false (route it).
  bool RefuseUnauthenticated(const httplib::Request& req, httplib::Response& res) const;

  // httplib's own errors on this API's paths (no such route, body too large) in Anthropic's
  // error shape.
  static void ErrorPage(const httplib::Request& req, httplib::Response& res);

  // Serves with `engine` under the model id `model_id`, preparing prompts with `preparer` (both
  // borrowed: they must outlive the HTTP server). Requests must name `model_id` as their model
  // (404 not_found_error otherwise). Call once.
  void SetEngine(Engine* engine, std::string model_id, const PromptPreparer* preparer);

  // New requests get 503 from now on.
  void StopAccepting() { draining_.store(true); }
  // StopAccepting, then waits until the responses in flight finish or `deadline` passes, then
  // cancels the rest and waits (briefly) for them to end.
  void Drain(absl::Time deadline);

 private:
  struct Serving {
    Engine* engine = nullptr;
    std::string model_id;
    const PromptPreparer* preparer = nullptr;
  };
  // What one response runs.
  struct Prepared {
    EngineRequest request;
    AnswerPlan answer;
    int prompt_tokens = 0;
  };

  void HandleMessages(const httplib::Request& req, httplib::Response& res);
  void HandleCountTokens(const httplib::Request& req, httplib::Response& res);
  // The engine request for a parsed request, or why not (400/404).
  absl::StatusOr<Prepared> Prepare(const Serving& s, const MessagesRequest& r) const;
  // The engine and model, or Unavailable while loading or draining.
  absl::StatusOr<const Serving*> GetServing() const;
  // Writes an Anthropic error response and counts it.
  void ReplyError(const std::string& route, const absl::Status& status,
                  httplib::Response& res) const;

  const RequestLimits limits_;
  const ApiKeys* const keys_;
  ServerMetrics* const metrics_;
  openai::RunRegistry runs_;
  std::atomic<const Serving*> serving_{nullptr};
  std::unique_ptr<Serving> serving_storage_;
  std::atomic<bool> draining_{false};
};

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_ANTHROPIC_API_H_
