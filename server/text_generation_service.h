// textgen.v1.TextGeneration over the engine, on gRPC's callback API: Generate and Chat stream
// through a GenerateReactor; the unary RPCs are quick (no model work) and finish on the gRPC
// thread. Until SetEngine (while the model loads) every RPC fails with UNAVAILABLE. Every RPC is
// counted in the metrics with its final status.
//
// Work per request on gRPC's threads is bounded: texts over RequestLimits::max_prompt_bytes are
// refused before any tokenizing, and a text over kInlinePromptBytes (Generate's prompt, a
// chat's messages, Tokenize's text) is prepared and tokenized on the PromptWorkers instead, so
// that health checks and small requests stay fast while clients send long prompts.
// With API keys every RPC first needs "authorization: Bearer KEY" metadata (UNAUTHENTICATED
// otherwise); the key's principal owns the sessions it creates, and to anyone else they do not
// exist (NOT_FOUND, as for an unknown id). The health and reflection services are not this
// service: they stay open.
#ifndef TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_
#define TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>

#include "engine/scheduler/engine.h"
#include "server/api_keys.h"
#include "server/chat_prompter.h"
#include "server/prompt_workers.h"
#include "server/request_convert.h"
#include "server/server_metrics.h"
#include "server/shutdown_clock.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::server {

class TextGenerationService final : public v1::TextGeneration::CallbackService {
 public:
  // Texts larger than this are tokenized on the prompt workers (tokenizing this many bytes
  // takes about a millisecond).
  static constexpr size_t kInlinePromptBytes = 8 << 10;

  // `kv_block_size` is reported by GetModelInfo. Borrows `keys` and `metrics`, which must
  // outlive the gRPC server this service is registered with.
  TextGenerationService(RequestLimits limits, int kv_block_size, const ApiKeys* keys,
                        ServerMetrics* metrics);

  // Finishes the prompt work already accepted (a long prompt's Submit) and refuses more. Call
  // after the gRPC server stopped, before the engine goes.
  void StopPromptWork() { workers_.Stop(); }
  // The gRPC server will cancel the streams still running at `cancel_at` (the end of the
  // shutdown's grace period): they are then logged and counted as UNAVAILABLE.
  void StartShutdown(std::chrono::system_clock::time_point cancel_at) {
    shutdown_.Start(cancel_at);
  }

  // The engine to serve with, once loaded (borrowed: it must outlive the gRPC server). Called
  // once; RPCs before it are UNAVAILABLE.
  void SetEngine(Engine* engine) { engine_.store(engine, std::memory_order_release); }
  // The chat template (or why there is none) for Chat. Called once, before SetEngine (whose
  // release store publishes it).
  void SetChatPrompter(std::unique_ptr<const ChatPrompter> chat) { chat_ = std::move(chat); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* Chat(grpc::CallbackServerContext* context,
                                                       const v1::ChatRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                          const v1::CreateSessionRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* context,
                                          const v1::DeleteSessionRequest* request,
                                          v1::DeleteSessionResponse* response) override;

 private:
  // The engine, or UNAVAILABLE (the status) if not loaded yet.
  grpc::Status GetEngine(Engine** engine) const;
  // The caller's principal from its authorization metadata ("" without keys), or
  // UNAUTHENTICATED (logged with the peer, never the key).
  grpc::Status Authenticate(grpc::CallbackServerContext* context, const char* method,
                            std::string* principal) const;
  // Authenticate, then the engine as GetEngine.
  grpc::Status Admit(grpc::CallbackServerContext* context, const char* method,
                     std::string* principal, Engine** engine) const;
  // What a request that did not parse gets: UNAUTHENTICATED without a valid key, else the
  // parse error (INVALID_ARGUMENT naming the field).
  grpc::Status Refusal(grpc::CallbackServerContext* context, const char* method,
                       const absl::Status& parse_error) const;
  grpc::ServerWriteReactor<v1::GenerateResponse>* RefuseStream(grpc::CallbackServerContext* context,
                                                               const char* method,
                                                               const absl::Status& parse_error);
  // Finishes a unary RPC with `status`, counting it under `method`.
  grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, const char* method,
                                        const grpc::Status& status);
  // The same with the call's reactor (context->DefaultReactor() may be taken only once).
  void FinishUnary(grpc::ServerUnaryReactor* reactor, const char* method,
                   const grpc::Status& status);

  std::atomic<Engine*> engine_{nullptr};
  std::unique_ptr<const ChatPrompter> chat_;
  const RequestLimits limits_;
  const int kv_block_size_;
  const ApiKeys* const keys_;
  ServerMetrics* const metrics_;
  PromptWorkers workers_;
  ShutdownClock shutdown_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_
