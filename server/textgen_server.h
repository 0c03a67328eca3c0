// The running server: the engine, the TextGeneration service, the standard health service and
// reflection on one gRPC server. Shutdown order matters: the gRPC server first (its streams
// reference the engine), then the engine.
#ifndef TEXTGEN_SERVER_TEXTGEN_SERVER_H_
#define TEXTGEN_SERVER_TEXTGEN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "server/server_options.h"
#include "server/text_generation_service.h"

namespace textgen::server {

class TextgenServer {
 public:
  // Loads the model, starts listening and reports SERVING on the health service.
  // Unavailable if the address cannot be bound; engine errors as they come.
  static absl::StatusOr<std::unique_ptr<TextgenServer>> Start(const ServerOptions& options);
  // Shutdown(zero grace) if not done yet.
  ~TextgenServer();
  TextgenServer(const TextgenServer&) = delete;
  TextgenServer& operator=(const TextgenServer&) = delete;

  // Health NOT_SERVING (load balancers stop sending), stop accepting calls, let in-flight ones
  // run until `grace` has passed and cancel the rest, then stop the engine.
  void Shutdown(absl::Duration grace);

  // The port actually bound (useful with port 0).
  int port() const { return port_; }
  Engine& engine() { return *engine_; }

 private:
  TextgenServer() = default;

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_TEXTGEN_SERVER_H_
