#include "server/openai/openai_api.h"

#include <httplib.h>

#include <ctime>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/http_listener.h"
#include "server/log_safe.h"
#include "server/openai/api_error.h"
#include "server/openai/chat_page.h"
#include "server/openai/completion_responder.h"
#include "server/openai/completion_run.h"
#include "spdlog/spdlog.h"

namespace textgen::server::openai {
namespace {

using json = nlohmann::ordered_json;

constexpr char kJson[] = "application/json";

// "chatcmpl-" + 24 random hex digits: unique per response, not a secret.
std::string ResponseId(Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%s%016x%08x", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", rng(),
                         static_cast<uint32_t>(rng()));
}

// A request's path as a metrics label: one of the routes, never what a client made up.
std::string MetricsRoute(const std::string& path) {
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/models") {
    return path;
  }
  return path.starts_with("/v1/models/") ? "/v1/models/{id}" : "/v1/(unknown)";
}

// The request field a pipeline error is about, by the name its message starts with ("tools:
// ...", "response_format.json_schema.schema: ..."); else the messages (the template's errors).
std::string PipelineErrorParam(const absl::Status& status) {
  const std::string m(status.message());
  for (const char* field : {"tools", "tool_choice", "response_format", "reasoning_budget"}) {
    if (m.starts_with(field)) return field;
  }
  return "messages";
}

json ModelJson(const std::string& id) {
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "textgen"}};
}

// The prompt must leave room for max_tokens in the context (unless the client left the length
// to the server, which then stops at the context's end).
absl::Status CheckContext(const CompletionRequest& r, size_t prompt_tokens, int n_ctx) {
  const char* prompt_field = r.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (prompt_tokens >= static_cast<size_t>(n_ctx)) {
    return FieldError(prompt_field, absl::StrCat("the prompt has ", prompt_tokens,
                                                 " tokens; the model's context holds ", n_ctx,
                                                 " (a prompt may take at most ", n_ctx - 1, ")"));
  }
  const int64_t total = static_cast<int64_t>(prompt_tokens) + r.decoding.max_new_tokens;
  if (!r.decoding.stop_at_context_limit && total > n_ctx) {
    return FieldError(r.max_tokens_field,
                      absl::StrCat("the prompt (", prompt_tokens, " tokens) + ", r.max_tokens_field,
                                   " (", r.decoding.max_new_tokens, ") = ", total,
                                   " exceeds the model's context of ", n_ctx, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

OpenAiApi::OpenAiApi(RequestLimits limits, const ApiKeys* keys, ServerMetrics* metrics)
    : limits_(limits), keys_(keys), metrics_(metrics) {}

void OpenAiApi::SetEngine(Engine* engine, std::string model_id, const PromptPreparer* preparer) {
  serving_storage_ = std::make_unique<Serving>(Serving{engine, std::move(model_id), preparer});
  serving_.store(serving_storage_.get(), std::memory_order_release);
}

absl::StatusOr<const OpenAiApi::Serving*> OpenAiApi::GetServing() const {
  if (draining_.load()) return absl::UnavailableError("the server is shutting down");
  const Serving* s = serving_.load(std::memory_order_acquire);
  if (s == nullptr) return absl::UnavailableError("the model is still loading");
  return s;
}

void OpenAiApi::ReplyError(const std::string& route, const absl::Status& status,
                           httplib::Response& res) const {
  const ApiError e = ToApiError(status);
  res.status = e.http_status;
  res.set_content(ErrorBody(e), kJson);
  metrics_->CountRequest(route, MetricsCode(status));
  spdlog::info("http {} status={} {}", LogSafe(route), e.http_status, LogSafe(status.message()));
}

bool OpenAiApi::RefuseUnauthenticated(const httplib::Request& req, httplib::Response& res) const {
  if (!keys_->enabled() || !req.path.starts_with("/v1/")) return false;
  absl::StatusOr<std::string> who = keys_->Authenticate(req.get_header_value("Authorization"));
  if (who.ok()) return false;
  res.set_header("WWW-Authenticate", "Bearer");
  // The body was not read: the connection cannot serve another request.
  CloseConnectionAfterResponse(res);
  ReplyError(MetricsRoute(req.path), who.status(), res);
  return true;
}

void OpenAiApi::ErrorPage(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
  std::string message = absl::StrCat("HTTP error ", res.status);
  if (res.status == 404) message = absl::StrCat("no route ", req.method, " ", req.path);
  if (res.status == 413) message = "the request body is too large";
  res.set_content(ErrorBody(ApiError{res.status, type, message, std::nullopt, std::nullopt}),
                  kJson);
}

void OpenAiApi::AddRoutes(httplib::Server& http) {
  // Before routing (and before the body is parsed): without a valid key nothing under /v1
  // runs, and an unknown /v1 path cannot be told from a known one.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return RefuseUnauthenticated(req, res) ? httplib::Server::HandlerResponse::Handled
                                           : httplib::Server::HandlerResponse::Unhandled;
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kChatPageHtml, "text/html; charset=utf-8");
  });
  http.Get("/v1/models", [this](const auto& req, auto& res) { HandleModels(req, res); });
  http.Get("/v1/models/(.+)", [this](const auto& req, auto& res) { HandleModels(req, res); });
  http.Post("/v1/chat/completions",
            [this](const auto& req, auto& res) { HandleCompletion(Endpoint::kChat, req, res); });
  http.Post("/v1/completions", [this](const auto& req, auto& res) {
    HandleCompletion(Endpoint::kCompletions, req, res);
  });
  // httplib's own errors (unknown path, body too large, ...) get OpenAI's error shape too.
  http.set_error_handler(&OpenAiApi::ErrorPage);
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          what = ex.what();
        } catch (...) {
        }
        spdlog::error("http handler failed: {}", what);
        res.status = 500;
        res.set_content(ErrorBody(ApiError{500, "server_error", "internal error: " + what,
                                           std::nullopt, std::nullopt}),
                        kJson);
      });
}

void OpenAiApi::HandleModels(const httplib::Request& req, httplib::Response& res) {
  const std::string route = req.matches.size() > 1 ? "/v1/models/{id}" : "/v1/models";
  absl::StatusOr<const Serving*> s = GetServing();
  if (!s.ok()) return ReplyError(route, s.status(), res);
  json body;
  if (req.matches.size() > 1) {
    const std::string id = req.matches[1];
    if (id != (*s)->model_id) {
      return ReplyError(route,
                        WithParam(absl::NotFoundError(absl::StrCat("model \"", id,
                                                                   "\" does not exist; this "
                                                                   "server serves \"",
                                                                   (*s)->model_id, "\"")),
                                  "model"),
                        res);
    }
    body = ModelJson(id);
  } else {
    body = {{"object", "list"}, {"data", json::array({ModelJson((*s)->model_id)})}};
  }
  res.set_content(DumpJson(body), kJson);
  metrics_->CountRequest(route, "OK");
}

absl::StatusOr<OpenAiApi::Prepared> OpenAiApi::ToEngineRequests(const Serving& s,
                                                                const CompletionRequest& r) const {
  if (!r.model.empty() && r.model != s.model_id) {
    return WithParam(
        absl::NotFoundError(absl::StrCat(
            "model \"", r.model, "\" does not exist; this server serves \"", s.model_id, "\"")),
        "model");
  }
  const Tokenizer& tok = s.engine->model().tokenizer();
  std::vector<int32_t> prompt;
  Prepared out;
  DecodingOptions decoding = r.decoding;
  if (!r.prediction_text.empty()) {
    decoding.speculation.prediction = tok.Encode(r.prediction_text, false);
  }
  if (r.endpoint == Endpoint::kChat) {
    ChatTurn turn = r.chat;
    turn.output = r.output;
    absl::StatusOr<PreparedChat> chat = s.preparer->Prepare(turn);
    if (!chat.ok()) return WithParam(chat.status(), PipelineErrorParam(chat.status()));
    prompt = std::move(chat->prompt);
    decoding.constraint = std::move(chat->constraint);
    decoding.shown_special_tokens = std::move(chat->shown_special_tokens);
    out.answer = std::move(chat->answer);
  } else {
    if (r.prompt_text.has_value()) {
      // As the engine encodes a prompt outside a session: BOS as the model wants.
      prompt = tok.Encode(*r.prompt_text, tok.add_bos());
    } else {
      prompt = r.prompt_ids;
    }
    absl::StatusOr<TokenConstraintFactory> constraint = s.preparer->OutputConstraint(r.output);
    if (!constraint.ok()) return WithParam(constraint.status(), r.output.field);
    decoding.constraint = *std::move(constraint);
  }
  if (absl::Status st = CheckContext(r, prompt.size(), s.engine->model().config().n_ctx);
      !st.ok()) {
    return st;
  }
  out.requests.resize(static_cast<size_t>(r.engine_requests()));
  for (size_t i = 0; i < out.requests.size(); ++i) {
    out.requests[i].prompt_ids = prompt;
    out.requests[i].decoding = decoding;
    // Seeded choices differ from each other, and each is reproducible.
    if (r.decoding.sampling.seed.has_value())
      out.requests[i].decoding.sampling.seed = *r.decoding.sampling.seed + i;
  }
  return out;
}

void OpenAiApi::HandleCompletion(Endpoint endpoint, const httplib::Request& req,
                                 httplib::Response& res) {
  const std::string route = req.path;
  absl::StatusOr<const Serving*> s = GetServing();
  if (!s.ok()) return ReplyError(route, s.status(), res);
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(endpoint, req.body, limits_);
  if (!r.ok()) return ReplyError(route, r.status(), res);
  absl::StatusOr<Prepared> prepared = ToEngineRequests(**s, *r);
  if (!prepared.ok()) return ReplyError(route, prepared.status(), res);
  absl::StatusOr<std::unique_ptr<CompletionRun>> run =
      CompletionRun::Start((*s)->engine, std::move(prepared->requests), metrics_);
  if (!run.ok()) return ReplyError(route, run.status(), res);

  const bool stream = r->stream;
  auto responder = std::make_shared<CompletionResponder>(
      *std::move(r), *std::move(run), ResponseId(endpoint), (*s)->model_id,
      (*s)->engine->model().tokenizer(), route, metrics_, &runs_, prepared->answer);
  if (stream) {
    res.set_header("Cache-Control", "no-cache");
    // nginx and similar proxies pass events on as they come instead of buffering them.
    res.set_header("X-Accel-Buffering", "no");
  }
  // The response owns the responder: if the connection fails before the body is written, the
  // provider is destroyed unrun and the responder cancels the engine requests.
  res.set_chunked_content_provider(
      stream ? "text/event-stream" : kJson,
      [responder](size_t, httplib::DataSink& sink) { return responder->Serve(sink); });
}

void OpenAiApi::Drain(absl::Time deadline) {
  draining_.store(true);
  if (runs_.WaitEmpty(deadline)) return;
  spdlog::info("HTTP completions still running at the end of the grace period: cancelling them");
  runs_.CancelAll();
  runs_.WaitEmpty(absl::Now() + absl::Seconds(5));
}

}  // namespace textgen::server::openai
