#include "server/text_generation_service.h"

#include <algorithm>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "server/generate_reactor.h"
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

namespace {

// One worker for every two cores: long prompts get at most half the machine, the rest is left
// to the engine and to gRPC. Beyond 32 waiting, long prompts are refused at once.
int PromptThreads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
}
constexpr int kMaxPendingPrompts = 32;

}  // namespace

TextGenerationService::TextGenerationService(RequestLimits limits, int kv_block_size,
                                             ServerMetrics* metrics)
    : limits_(limits),
      kv_block_size_(kv_block_size),
      metrics_(metrics),
      workers_(PromptThreads(), kMaxPendingPrompts) {}

grpc::Status TextGenerationService::GetEngine(Engine** engine) const {
  *engine = engine_.load(std::memory_order_acquire);
  if (*engine == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
  }
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
  if (grpc::Status st = GetEngine(&engine); !st.ok()) {
    metrics_->CountRequest("Generate", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  // Converting copies the prompt (after checking its size); the engine tokenizes it in Submit.
  absl::StatusOr<EngineRequest> converted = ToEngineRequest(*request, limits_);
  const bool long_prompt = converted.ok() && converted->prompt_text.has_value() &&
                           converted->prompt_text->size() > kInlinePromptBytes;
  return GenerateReactor::Start(
      engine, [converted = std::move(converted)]() mutable { return std::move(converted); },
      long_prompt ? &workers_ : nullptr, "Generate", metrics_, &shutdown_, context);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TextGenerationService::Chat(
    grpc::CallbackServerContext* context, const v1::ChatRequest* request) {
  Engine* engine = nullptr;
  if (grpc::Status st = GetEngine(&engine); !st.ok()) {
    metrics_->CountRequest("Chat", GrpcCodeName(st.error_code()));
    return new FinishedStream(st);
  }
  if (chat_ == nullptr) {
    return GenerateReactor::Start(
        engine, [] { return absl::FailedPreconditionError("this server has no chat template"); },
        nullptr, "Chat", metrics_, &shutdown_, context);
  }
  // Rendering and tokenizing long messages happens on a worker, from a copy: the call's request
  // may be gone by the time it runs (the client cancelled). Over the limit, Build refuses at
  // once without rendering.
  const size_t bytes = ChatTextBytes(*request);
  if (bytes > kInlinePromptBytes && bytes <= limits_.max_prompt_bytes) {
    auto copy = std::make_shared<const v1::ChatRequest>(*request);
    return GenerateReactor::Start(
        engine,
        [engine, chat = chat_.get(), copy, limits = limits_] {
          return chat->Build(*engine, *copy, limits);
        },
        &workers_, "Chat", metrics_, &shutdown_, context);
  }
  return GenerateReactor::Start(
      engine, [&] { return chat_->Build(*engine, *request, limits_); }, nullptr, "Chat", metrics_,
      &shutdown_, context);
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                          const v1::TokenizeRequest* request,
                                                          v1::TokenizeResponse* response) {
  Engine* engine = nullptr;
  if (grpc::Status st = GetEngine(&engine); !st.ok()) return FinishUnary(context, "Tokenize", st);
  if (absl::Status st = CheckPromptBytes("text", request->text().size(), limits_); !st.ok()) {
    return FinishUnary(context, "Tokenize", ToGrpcStatus(st));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The call (request and response) lives until Finish, so the work may read and write them.
  auto tokenize = [this, engine, request, response, reactor] {
    const Tokenizer& tok = engine->model().tokenizer();
    // Same rule as a Generate prompt: BOS only when the model uses it.
    for (int32_t id : tok.Encode(request->text(), request->add_special() && tok.add_bos())) {
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
  if (grpc::Status st = GetEngine(&engine); !st.ok()) {
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
  if (grpc::Status st = GetEngine(&engine); !st.ok()) {
    return FinishUnary(context, "CreateSession", st);
  }
  absl::StatusOr<std::string> id = engine->CreateSession(request->session_id());
  if (!id.ok()) {
    spdlog::info("create_session requested={} status={}", ValidUtf8(request->session_id()),
                 id.status().ToString());
    return FinishUnary(context, "CreateSession", ToGrpcStatus(id.status()));
  }
  response->set_session_id(*id);
  spdlog::info("create_session id={} chosen_by={}", *id,
               request->session_id().empty() ? "server" : "client");
  return FinishUnary(context, "CreateSession", grpc::Status::OK);
}

grpc::ServerUnaryReactor* TextGenerationService::DeleteSession(
    grpc::CallbackServerContext* context, const v1::DeleteSessionRequest* request,
    v1::DeleteSessionResponse* response) {
  Engine* engine = nullptr;
  if (grpc::Status st = GetEngine(&engine); !st.ok()) {
    return FinishUnary(context, "DeleteSession", st);
  }
  absl::Status st = engine->DeleteSession(request->session_id());
  spdlog::info("delete_session id={} status={}", ValidUtf8(request->session_id()), st.ToString());
  return FinishUnary(context, "DeleteSession", ToGrpcStatus(st));
}

}  // namespace textgen::server
