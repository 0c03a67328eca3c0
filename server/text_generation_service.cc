#include "server/text_generation_service.h"

#include <string>

#include "engine/format/dtype.h"
#include "server/generate_reactor.h"
#include "server/log_safe.h"
#include "server/response_convert.h"
#include "server/status_convert.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

// A Generate stream that ends at once with a status (no engine to run it).
class FinishedStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit FinishedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

TextGenerationService::TextGenerationService(RequestLimits limits, int kv_block_size,
                                             const ApiKeys* keys, ServerMetrics* metrics)
    : limits_(limits), kv_block_size_(kv_block_size), keys_(keys), metrics_(metrics) {}

grpc::Status TextGenerationService::GetEngine(Engine** engine) const {
  *engine = engine_.load(std::memory_order_acquire);
  if (*engine == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
  }
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::Admit(grpc::CallbackServerContext* context, const char* method,
                                          std::string* principal, Engine** engine) const {
  if (keys_->enabled()) {
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
  }
  return GetEngine(engine);
}

grpc::ServerUnaryReactor* TextGenerationService::FinishUnary(grpc::CallbackServerContext* context,
                                                             const char* method,
                                                             const grpc::Status& status) {
  metrics_->CountRequest(method, GrpcCodeName(status.error_code()));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Generate", &principal, &engine); !st.ok()) {
    metrics_->CountRequest("Generate", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  absl::StatusOr<EngineRequest> converted = ToEngineRequest(*request, limits_);
  if (converted.ok()) converted->session_owner = principal;
  return GenerateReactor::Start(engine, std::move(converted), "Generate", metrics_, context);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Chat", &principal, &engine); !st.ok()) {
    metrics_->CountRequest("Chat", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  absl::StatusOr<EngineRequest> converted =
      chat_ != nullptr ? chat_->Build(*engine, *request, limits_, principal)
                       : absl::FailedPreconditionError("this server has no chat template");
  return GenerateReactor::Start(engine, std::move(converted), "Chat", metrics_, context);
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                          const v1::TokenizeRequest* request,
                                                          v1::TokenizeResponse* response) {
  Engine* engine = nullptr;
  std::string principal;
  if (grpc::Status st = Admit(context, "Tokenize", &principal, &engine); !st.ok()) {
    return FinishUnary(context, "Tokenize", st);
  }
  const Tokenizer& tok = engine->model().tokenizer();
  // Same rule as a Generate prompt: BOS only when the model uses it.
  for (int32_t id : tok.Encode(request->text(), request->add_special() && tok.add_bos())) {
    response->add_ids(id);
    response->add_pieces(ValidUtf8(tok.TokenBytes(id)));
  }
  return FinishUnary(context, "Tokenize", grpc::Status::OK);
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
