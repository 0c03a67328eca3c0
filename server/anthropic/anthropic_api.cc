#include "server/anthropic/anthropic_api.h"

#include <httplib.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/anthropic/anthropic_error.h"
#include "server/anthropic/messages_responder.h"
#include "server/error_table.h"
#include "server/http_listener.h"
#include "server/log_safe.h"
#include "server/openai/api_error.h"
#include "server/openai/completion_json.h"
#include "server/openai/completion_run.h"
#include "spdlog/spdlog.h"

namespace textgen::server::anthropic {
namespace {

using json = nlohmann::ordered_json;

constexpr char kJson[] = "application/json";
constexpr char kMessagesRoute[] = "/v1/messages";
constexpr char kCountTokensRoute[] = "/v1/messages/count_tokens";

// "msg_" + 24 random alphanumerics: unique per response, not a secret.
std::string MessageId() {
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "msg_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
  return id;
}

// A request's path as a metrics label: one of the routes, never what a client made up.
std::string MetricsRoute(const std::string& path) {
  if (path == kMessagesRoute || path == kCountTokensRoute) return path;
  return "/v1/(unknown)";
}

absl::Status CheckModel(const std::string& asked, const std::string& served) {
  if (asked == served) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("model: \"", asked, "\" does not exist; this server serves \"", served, "\""));
}

// The pipeline's preparation errors with this API's field names; a template's own errors are
// about the messages.
absl::Status PipelineError(const absl::Status& status) { return ToAnthropicNames(status); }

// The prompt must leave room for max_tokens in the context.
absl::Status CheckContext(size_t prompt_tokens, int max_tokens, int n_ctx) {
  if (prompt_tokens >= static_cast<size_t>(n_ctx)) {
    return openai::FieldError(
        "messages",
        absl::StrCat("the prompt has ", prompt_tokens, " tokens; the model's context holds ", n_ctx,
                     " (a prompt may take at most ", n_ctx - 1, ")"));
  }
  const int64_t total = static_cast<int64_t>(prompt_tokens) + max_tokens;
  if (total > n_ctx) {
    return openai::FieldError(
        "max_tokens",
        absl::StrCat("the prompt (", prompt_tokens, " tokens) + max_tokens (", max_tokens,
                     ") = ", total, " exceeds the model's context of ", n_ctx, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

AnthropicApi::AnthropicApi(RequestLimits limits, const ApiKeys* keys, ServerMetrics* metrics)
    : limits_(limits), keys_(keys), metrics_(metrics) {}

bool AnthropicApi::Serves(std::string_view path) {
  return path == kMessagesRoute || path.starts_with("/v1/messages/");
}

void AnthropicApi::SetEngine(Engine* engine, std::string model_id, const PromptPreparer* preparer) {
  serving_storage_ = std::make_unique<Serving>(Serving{engine, std::move(model_id), preparer});
  serving_.store(serving_storage_.get(), std::memory_order_release);
}

absl::StatusOr<const AnthropicApi::Serving*> AnthropicApi::GetServing() const {
  if (draining_.load()) return absl::UnavailableError("the server is shutting down");
  const Serving* s = serving_.load(std::memory_order_acquire);
  if (s == nullptr) return absl::UnavailableError("the model is still loading");
  return s;
}

void AnthropicApi::ReplyError(const std::string& route, const absl::Status& status,
                              httplib::Response& res) const {
  res.status = HttpStatusOf(status);
  res.set_content(ErrorBody(status), kJson);
  metrics_->CountRequest(route, MetricsCode(status));
  spdlog::info("http {} status={} {}", LogSafe(route), res.status, LogSafe(status.message()));
}

bool AnthropicApi::RefuseUnauthenticated(const httplib::Request& req,
                                         httplib::Response& res) const {
  if (!keys_->enabled()) return false;
  // Anthropic's clients send x-api-key; "authorization: Bearer" is accepted as on every route.
  const std::string key = req.get_header_value("x-api-key");
  absl::StatusOr<std::string> who = key.empty()
                                        ? keys_->Authenticate(req.get_header_value("Authorization"))
                                        : keys_->Authenticate(absl::StrCat("Bearer ", key));
  if (who.ok()) return false;
  if (key.empty() && !req.has_header("Authorization")) {
    who = absl::UnauthenticatedError(
        "missing API key: send the header \"x-api-key: KEY\" (or \"authorization: Bearer KEY\")");
  }
  // The body was not read: the connection cannot serve another request.
  CloseConnectionAfterResponse(res);
  ReplyError(MetricsRoute(req.path), who.status(), res);
  return true;
}

void AnthropicApi::ErrorPage(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  std::string message = absl::StrCat("HTTP error ", res.status);
  // The error table's types for the statuses it has; 413 is Anthropic's request_too_large,
  // which no absl::Status maps to (only httplib refuses a body for its size).
  const char* type =
      MapError(res.status >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kInvalidArgument)
          .anthropic_type;
  if (res.status == 404) {
    message = absl::StrCat("no route ", req.method, " ", req.path);
    type = MapError(absl::StatusCode::kNotFound).anthropic_type;
  }
  if (res.status == 413) {
    message = "the request body is too large";
    type = "request_too_large";
  }
  res.set_content(ErrorBody(type, message), kJson);
}

void AnthropicApi::AddRoutes(httplib::Server& http) {
  http.Post(kMessagesRoute, [this](const auto& req, auto& res) { HandleMessages(req, res); });
  http.Post(kCountTokensRoute, [this](const auto& req, auto& res) { HandleCountTokens(req, res); });
}

absl::StatusOr<AnthropicApi::Prepared> AnthropicApi::Prepare(const Serving& s,
                                                             const MessagesRequest& r) const {
  if (absl::Status st = CheckModel(r.model, s.model_id); !st.ok()) return st;
  absl::StatusOr<PreparedChat> chat = s.preparer->Prepare(r.chat);
  if (!chat.ok()) return PipelineError(chat.status());
  if (r.thinking_requested && s.preparer->syntax().reasoning == ReasoningSyntax::kNone) {
    return openai::FieldError("thinking",
                              "this model's chat template has no reasoning block: thinking "
                              "cannot be enabled (send thinking {\"type\": \"disabled\"} or none)");
  }
  const int n_ctx = s.engine->model().config().n_ctx;
  if (absl::Status st = CheckContext(chat->prompt.size(), r.decoding.max_new_tokens, n_ctx);
      !st.ok()) {
    return st;
  }
  Prepared out;
  out.prompt_tokens = static_cast<int>(chat->prompt.size());
  out.request.prompt_ids = std::move(chat->prompt);
  out.request.decoding = r.decoding;
  out.request.decoding.constraint = std::move(chat->constraint);
  out.request.decoding.shown_special_tokens = std::move(chat->shown_special_tokens);
  out.answer = std::move(chat->answer);
  return out;
}

void AnthropicApi::HandleMessages(const httplib::Request& req, httplib::Response& res) {
  const std::string route = kMessagesRoute;
  absl::StatusOr<const Serving*> s = GetServing();
  if (!s.ok()) return ReplyError(route, s.status(), res);
  absl::StatusOr<MessagesRequest> r =
      ParseMessagesRequest(MessagesRoute::kCreate, req.body, limits_);
  if (!r.ok()) return ReplyError(route, r.status(), res);
  absl::StatusOr<Prepared> prepared = Prepare(**s, *r);
  if (!prepared.ok()) return ReplyError(route, prepared.status(), res);
  std::vector<EngineRequest> requests;
  requests.push_back(std::move(prepared->request));
  absl::StatusOr<std::unique_ptr<openai::CompletionRun>> run =
      openai::CompletionRun::Start((*s)->engine, std::move(requests), metrics_);
  if (!run.ok()) return ReplyError(route, run.status(), res);

  MessagesResponse response;
  response.stream = r->stream;
  response.id = MessageId();
  response.model = (*s)->model_id;
  response.route = route;
  response.stop_sequences = r->decoding.stop;
  response.prompt_tokens = prepared->prompt_tokens;
  response.answer = std::move(prepared->answer);
  auto responder =
      std::make_shared<MessagesResponder>(std::move(response), *std::move(run), metrics_, &runs_);
  if (r->stream) {
    res.set_header("Cache-Control", "no-cache");
    // nginx and similar proxies pass events on as they come instead of buffering them.
    res.set_header("X-Accel-Buffering", "no");
  }
  // The response owns the responder: if the connection fails before the body is written, the
  // provider is destroyed unrun and the responder cancels the engine request.
  res.set_chunked_content_provider(
      r->stream ? "text/event-stream" : kJson,
      [responder](size_t, httplib::DataSink& sink) { return responder->Serve(sink); });
}

void AnthropicApi::HandleCountTokens(const httplib::Request& req, httplib::Response& res) {
  const std::string route = kCountTokensRoute;
  absl::StatusOr<const Serving*> s = GetServing();
  if (!s.ok()) return ReplyError(route, s.status(), res);
  absl::StatusOr<MessagesRequest> r =
      ParseMessagesRequest(MessagesRoute::kCountTokens, req.body, limits_);
  if (!r.ok()) return ReplyError(route, r.status(), res);
  if (absl::Status st = CheckModel(r->model, (*s)->model_id); !st.ok()) {
    return ReplyError(route, st, res);
  }
  absl::StatusOr<std::vector<int32_t>> ids = (*s)->preparer->PromptIds(r->chat);
  if (!ids.ok()) return ReplyError(route, PipelineError(ids.status()), res);
  res.set_content(openai::DumpJson(json{{"input_tokens", ids->size()}}), kJson);
  metrics_->CountRequest(route, "OK");
}

void AnthropicApi::Drain(absl::Time deadline) {
  draining_.store(true);
  if (runs_.WaitEmpty(deadline)) return;
  spdlog::info(
      "Anthropic API responses still running at the end of the grace period: "
      "cancelling them");
  runs_.CancelAll();
  runs_.WaitEmpty(absl::Now() + absl::Seconds(5));
}

}  // namespace textgen::server::anthropic
