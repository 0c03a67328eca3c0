// textgen.v1.TextGeneration over the engine, on gRPC's callback API: Generate streams through a
// GenerateReactor; the unary RPCs are quick (no model work) and finish on the gRPC thread.
#ifndef TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_
#define TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "engine/scheduler/engine.h"
#include "server/request_convert.h"
#include "textgen/v1/textgen.grpc.pb.h"

namespace textgen::server {

class TextGenerationService final : public v1::TextGeneration::CallbackService {
 public:
  // Borrows the engine, which must outlive the gRPC server this service is registered with.
  // `kv_block_size` is reported by GetModelInfo.
  TextGenerationService(Engine* engine, RequestLimits limits, int kv_block_size);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
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
  Engine* const engine_;
  const RequestLimits limits_;
  const int kv_block_size_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_TEXT_GENERATION_SERVICE_H_
