#include "server/textgen_server.h"

#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

constexpr char kServiceName[] = "textgen.v1.TextGeneration";

void SetServing(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  if (health == nullptr) return;
  // "" is the server as a whole (what most probes ask about).
  health->SetServingStatus("", serving);
  health->SetServingStatus(kServiceName, serving);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TextgenServer>> TextgenServer::Start(const ServerOptions& options) {
  auto s = std::unique_ptr<TextgenServer>(new TextgenServer());
  const auto load_start = std::chrono::steady_clock::now();
  TG_ASSIGN_OR_RETURN(s->engine_, Engine::Create(options.engine));
  const ModelConfig& c = s->engine_->model().config();
  spdlog::info(
      "loaded {} ({}, {} layers, vocab {}, context {}, {}) in {:.0f} ms", options.engine.model_path,
      s->engine_->model().format(), c.n_layers, c.n_vocab, c.n_ctx, DTypeName(c.weight_type),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count());
  s->service_ = std::make_unique<TextGenerationService>(s->engine_.get(), options.limits,
                                                        options.engine.kv_block_size);

  // Process-wide switch; must precede the builder. (Reflection is registered by main: its
  // library carries generated descriptors that must not be linked into every user of this one.)
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  // Reflection is a synchronous service; its pollers notice a shutdown only when their
  // completion-queue wait times out (10 s by default), which would delay every exit.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 200);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->shut_down_ = true;
    if (s->server_ != nullptr) s->server_->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  SetServing(*s->server_, true);
  const EngineStats stats = s->engine_->Stats();
  spdlog::info("serving {} on {} (port {}); KV cache {} blocks of {} tokens ({})", kServiceName,
               options.listen, s->port_, stats.kv_blocks_total, options.engine.kv_block_size,
               KvTypeName(s->engine_->kv_type()));
  return s;
}

TextgenServer::~TextgenServer() { Shutdown(absl::ZeroDuration()); }

void TextgenServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    SetServing(*server_, false);
    // Returns once every call has finished: in-flight streams may complete within the grace,
    // after it gRPC cancels them (their reactors cancel the engine requests).
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
    spdlog::debug("gRPC server stopped");
  }
  // Ends whatever the engine still runs (nothing listens any more).
  engine_.reset();
  spdlog::debug("engine stopped");
}

}  // namespace textgen::server
