#include "server/text_generation_service.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "engine/ops/threading.h"
#include "server/error_table.h"
#include "server/generate_reactor.h"
#include "server/log_safe.h"
#include "server/parsed_request.h"
#include "server/response_convert.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

// A Generate stream that ends at once with a status (no engine to run it).
class FinishedStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit FinishedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// The method's index in the service, as the generated code numbers them (the .proto's order).
int MethodIndex(const char* name) {
  return v1::GenerateRequest::descriptor()
      ->file()
      ->FindServiceByName("TextGeneration")
      ->FindMethodByName(name)
      ->index();
}

}  // namespace

namespace {

// One worker for every two cores: long prompts get at most half the machine, the rest is left
// to the engine and to gRPC. Beyond 32 waiting, long prompts are refused at once.
int PromptThreads() { return std::max(1, ops::DefaultNumThreads() / 2); }
constexpr int kMaxPendingPrompts = 32;

}  // namespace

TextGenerationService::TextGenerationService(RequestLimits limits, int kv_block_size,
                                             const ApiKeys* keys, ServerMetrics* metrics)
    : limits_(limits),
      kv_block_size_(kv_block_size),
      keys_(keys),
      metrics_(metrics),
      workers_(PromptThreads(), kMaxPendingPrompts) {
  // The generated handlers answer a request that does not parse with UNIMPLEMENTED and no
  // message; these parse it themselves (parsed_request.h) and say which field is wrong.
  using grpc::internal::CallbackServerStreamingHandler;
  using grpc::internal::CallbackUnaryHandler;
  MarkMethodCallback(
      MethodIndex("Generate"),
      new CallbackServerStreamingHandler<ParsedRequest<v1::GenerateRequest>, v1::GenerateResponse>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::GenerateRequest>* r) {
            return r->error.ok() ? Generate(c, &r->message) : RefuseStream(c, "Generate", r->error);
          }));
  MarkMethodCallback(
      MethodIndex("Chat"),
      new CallbackServerStreamingHandler<ParsedRequest<v1::ChatRequest>, v1::GenerateResponse>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::ChatRequest>* r) {
            return r->error.ok() ? Chat(c, &r->message) : RefuseStream(c, "Chat", r->error);
          }));
  MarkMethodCallback(
      MethodIndex("Tokenize"),
      new CallbackUnaryHandler<ParsedRequest<v1::TokenizeRequest>, v1::TokenizeResponse>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::TokenizeRequest>* r,
                 v1::TokenizeResponse* response) {
            return r->error.ok() ? Tokenize(c, &r->message, response)
                                 : FinishUnary(c, "Tokenize", Refusal(c, "Tokenize", r->error));
          }));
  MarkMethodCallback(
      MethodIndex("GetModelInfo"),
      new CallbackUnaryHandler<ParsedRequest<v1::GetModelInfoRequest>, v1::ModelInfo>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::GetModelInfoRequest>* r,
                 v1::ModelInfo* response) {
            return r->error.ok()
                       ? GetModelInfo(c, &r->message, response)
                       : FinishUnary(c, "GetModelInfo", Refusal(c, "GetModelInfo", r->error));
          }));
  MarkMethodCallback(
      MethodIndex("CreateSession"),
      new CallbackUnaryHandler<ParsedRequest<v1::CreateSessionRequest>, v1::Session>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::CreateSessionRequest>* r,
                 v1::Session* response) {
            return r->error.ok()
                       ? CreateSession(c, &r->message, response)
                       : FinishUnary(c, "CreateSession", Refusal(c, "CreateSession", r->error));
          }));
  MarkMethodCallback(
      MethodIndex("DeleteSession"),
      new CallbackUnaryHandler<ParsedRequest<v1::DeleteSessionRequest>, v1::DeleteSessionResponse>(
          [this](grpc::CallbackServerContext* c, const ParsedRequest<v1::DeleteSessionRequest>* r,
                 v1::DeleteSessionResponse* response) {
            return r->error.ok()
                       ? DeleteSession(c, &r->message, response)
                       : FinishUnary(c, "DeleteSession", Refusal(c, "DeleteSession", r->error));
          }));
}

grpc::Status TextGenerationService::Refusal(grpc::CallbackServerContext* context,
                                            const char* method,
                                            const absl::Status& parse_error) const {
  std::string principal;
  // A caller without a valid key learns nothing, not even what is wrong with its request.
  if (grpc::Status st = Authenticate(context, method, &principal); !st.ok()) return st;
  return ToGrpcStatus(parse_error);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::RefuseStream(
    grpc::CallbackServerContext* context, const char* method, const absl::Status& parse_error) {
  const grpc::Status st = Refusal(context, method, parse_error);
  metrics_->CountRequest(method, GrpcCodeName(st.error_code()));
  return new FinishedStream(st);
}

grpc::Status TextGenerationService::GetEngine(Engine** engine) const {
  *engine = engine_.load(std::memory_order_acquire);
  if (*engine == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
  }
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::Admit(grpc::CallbackServerContext* context, const char* method,
                                          std::string* principal, Engine** engine) const {
  if (grpc::Status st = Authenticate(context, method, principal); !st.ok()) return st;
  return GetEngine(engine);
}

grpc::Status TextGenerationService::Authenticate(grpc::CallbackServerContext* context,
                                                 const char* method, std::string* principal) const {
  if (!keys_->enabled()) return grpc::Status::OK;
  absl::string_view authorization;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<std::string> who = keys_->Authenticate(authorization);
  if (!who.ok()) {
    spdlog::info("{} refused from {}: {}", method, LogSafe(context->peer()),
                 std::string(who.status().message()));
    return ToGrpcStatus(who.status());
  }
  *principal = *std::move(who);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* TextGenerationService::FinishUnary(grpc::CallbackServerContext* context,
                                                             const char* method,
                                                             const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FinishUnary(reactor, method, status);
  return reactor;
}

void TextGenerationService::FinishUnary(grpc::ServerUnaryReactor* reactor, const char* method,
                                        const grpc::Status& status) {
  metrics_->CountRequest(method, GrpcCodeName(status.error_code()));
  reactor->Finish(status);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Generate", &principal, &engine); !st.ok()) {
    metrics_->CountRequest("Generate", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  if (request->has_response_format()) {
    if (chat_ == nullptr) {
      return GenerateReactor::Start(
          engine,
          []() -> absl::StatusOr<PreparedGeneration> {
            return absl::UnavailableError("the model is still loading");
          },
          nullptr, "Generate", metrics_, &shutdown_, context);
    }
    // Compiling the format's grammar takes milliseconds: on a worker, from a copy.
    auto copy = std::make_shared<const v1::GenerateRequest>(*request);
    return GenerateReactor::Start(
        engine,
        [chat = chat_.get(), copy, limits = limits_, principal]() {
          absl::StatusOr<PreparedGeneration> p = chat->BuildGenerate(*copy, limits);
          if (p.ok()) p->request.session_owner = principal;
          return p;
        },
        &workers_, "Generate", metrics_, &shutdown_, context);
  }
  // Converting copies the prompt (after checking its size); the engine tokenizes it in Submit.
  absl::StatusOr<EngineRequest> converted = ToEngineRequest(*request, limits_);
  if (converted.ok()) converted->session_owner = principal;
  const bool long_prompt = converted.ok() && converted->prompt_text.has_value() &&
                           converted->prompt_text->size() > kInlinePromptBytes;
  return GenerateReactor::Start(
      engine,
      [converted = std::move(converted)]() mutable -> absl::StatusOr<PreparedGeneration> {
        if (!converted.ok()) return converted.status();
        return PreparedGeneration{*std::move(converted), AnswerPlan()};
      },
      long_prompt ? &workers_ : nullptr, "Generate", metrics_, &shutdown_, context);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Chat", &principal, &engine); !st.ok()) {
    metrics_->CountRequest("Chat", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  if (chat_ == nullptr) {
    return GenerateReactor::Start(
        engine,
        []() -> absl::StatusOr<PreparedGeneration> {
          return absl::FailedPreconditionError("this server has no chat template");
        },
        nullptr, "Chat", metrics_, &shutdown_, context);
  }
  // Rendering and tokenizing long messages happens on a worker, from a copy: the call's request
  // may be gone by the time it runs (the client cancelled). Over the limit, Build refuses at
  // once without rendering.
  const size_t bytes = ChatTextBytes(*request);
  if ((bytes > kInlinePromptBytes || ChatNeedsWork(*request)) &&
      bytes <= limits_.max_prompt_bytes) {
    auto copy = std::make_shared<const v1::ChatRequest>(*request);
    return GenerateReactor::Start(
        engine,
        [engine, chat = chat_.get(), copy, limits = limits_, principal] {
          return chat->Build(*engine, *copy, limits, principal);
        },
        &workers_, "Chat", metrics_, &shutdown_, context);
  }
  return GenerateReactor::Start(
      engine, [&] { return chat_->Build(*engine, *request, limits_, principal); }, nullptr, "Chat",
      metrics_, &shutdown_, context);
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                          const v1::TokenizeRequest* request,
                                                          v1::TokenizeResponse* response) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Tokenize", &principal, &engine); !st.ok()) {
    return FinishUnary(context, "Tokenize", st);
  }
  if (absl::Status st = CheckPromptBytes("text", request->text().size(), limits_); !st.ok()) {
    return FinishUnary(context, "Tokenize", ToGrpcStatus(st));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The call (request and response) lives until Finish, so the work may read and write them.
  auto tokenize = [this, engine, request, response, reactor] {
    const Tokenizer& tok = engine->model().tokenizer();
    // Same rule as a Generate prompt: BOS only when the model uses it.
    for (int32_t id : tok.Encode(request->text(), request->add_special() && tok.add_bos(),
                                 request->parse_special())) {
      response->add_ids(id);
      response->add_pieces(ValidUtf8(tok.TokenBytes(id)));
    }
    FinishUnary(reactor, "Tokenize", grpc::Status::OK);
  };
  if (request->text().size() <= kInlinePromptBytes) {
    tokenize();
  } else if (!workers_.TryPost(tokenize)) {
    FinishUnary(reactor, "Tokenize",
                grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             absl::StrCat("too many long texts are being tokenized (",
                                          kMaxPendingPrompts, " waiting); retry later")));
  }
  return reactor;
}

grpc::ServerUnaryReactor* TextGenerationService::GetModelInfo(
    grpc::CallbackServerContext* context, const v1::GetModelInfoRequest* request,
    v1::ModelInfo* response) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "GetModelInfo", &principal, &engine); !st.ok()) {
    return FinishUnary(context, "GetModelInfo", st);
  }
  const Model& model = engine->model();
  const ModelConfig& c = model.config();
  const EngineStats stats = engine->Stats();
  response->set_name(ValidUtf8(c.name));
  response->set_architecture(ValidUtf8(c.architecture));
  response->set_vocab_size(static_cast<uint32_t>(c.n_vocab));
  response->set_context_length(static_cast<uint32_t>(c.n_ctx));
  response->set_bos_id(model.tokenizer().bos_id());
  response->set_eos_id(model.tokenizer().eos_id());
  for (int32_t id : model.tokenizer().eog_ids()) response->add_eog_token_ids(id);
  response->set_weight_type(std::string(DTypeName(c.weight_type)));
  response->set_kv_block_size(static_cast<uint32_t>(kv_block_size_));
  response->set_kv_blocks_total(static_cast<uint32_t>(stats.kv_blocks_total));
  response->set_kv_blocks_free(static_cast<uint32_t>(stats.kv_blocks_free));
  response->set_embedding_length(static_cast<uint32_t>(c.n_embd));
  response->set_block_count(static_cast<uint32_t>(c.n_layers));
  response->set_head_count(static_cast<uint32_t>(c.n_heads));
  response->set_head_count_kv(static_cast<uint32_t>(c.n_kv_heads));
  response->set_format(model.format());
  return FinishUnary(context, "GetModelInfo", grpc::Status::OK);
}

grpc::ServerUnaryReactor* TextGenerationService::CreateSession(
    grpc::CallbackServerContext* context, const v1::CreateSessionRequest* request,
    v1::Session* response) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "CreateSession", &principal, &engine); !st.ok()) {
    return FinishUnary(context, "CreateSession", st);
  }
  const bool chosen = !request->session_id().empty();
  const absl::Status checked = CheckChosenSessionId(request->session_id());
  absl::StatusOr<std::string> id = checked.ok()
                                       ? engine->CreateSession(request->session_id(), principal)
                                       : absl::StatusOr<std::string>(checked);
  if (!id.ok()) {
    spdlog::info("create_session chosen_by={} status={}", chosen ? "client" : "server",
                 LogSafe(id.status().ToString()));
    return FinishUnary(context, "CreateSession", ToGrpcStatus(id.status()));
  }
  response->set_session_id(*id);
  spdlog::info("create_session id={} chosen_by={}", LoggedSessionId(*id),
               chosen ? "client" : "server");
  return FinishUnary(context, "CreateSession", grpc::Status::OK);
}

grpc::ServerUnaryReactor* TextGenerationService::DeleteSession(
    grpc::CallbackServerContext* context, const v1::DeleteSessionRequest* request,
    v1::DeleteSessionResponse* response) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "DeleteSession", &principal, &engine); !st.ok()) {
    return FinishUnary(context, "DeleteSession", st);
  }
  absl::Status st = CheckSessionId(request->session_id());
  if (st.ok()) st = engine->DeleteSession(request->session_id(), principal);
  spdlog::info("delete_session id={} status={}", LoggedSessionId(request->session_id()),
               GrpcCodeName(ToGrpcStatus(st).error_code()));
  return FinishUnary(context, "DeleteSession", ToGrpcStatus(st));
}

}  // namespace textgen::server
