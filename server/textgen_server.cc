#include "server/textgen_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/chat/model_chat_template.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/threading.h"
#include "engine/util/status_macros.h"
#include "spdlog/spdlog.h"
#include "state/redis_session_journal.h"
#include "state/sqlite_session_journal.h"

namespace textgen::server {
namespace {

constexpr char kServiceName[] = "textgen.v1.TextGeneration";
constexpr int kMetricsThreads = 4;

// The kernels' instruction-set level is chosen at run time from the CPU: say which one runs
// and why (a cap, a refused AMX permission). A bad TEXTGEN_MAX_ISA fails the start.
absl::Status LogKernels() {
  TG_ASSIGN_OR_RETURN(const ops::KernelChoice choice, ops::ChooseKernels());
  spdlog::info("{}", ops::DescribeKernels(choice));
  spdlog::info("default: {}", ops::DescribeThreadDefault());
  return absl::OkStatus();
}

// The id /v1/models lists: the model file's name, or its directory's.
std::string ModelId(const std::string& model_path) {
  std::filesystem::path p(model_path);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// Whether HOST:PORT names this host only (so that no one else can reach it).
bool IsLoopback(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// Serving others is fine, but not silently without TLS or keys.
void WarnIfExposed(const ServerOptions& o, bool keys) {
  struct Listener {
    const char* flag;
    const std::string& address;
    bool serves_api;  // false: /metrics, open by design
  };
  for (const Listener& l :
       {Listener{"--listen", o.listen, true}, Listener{"--http-listen", o.http_listen, true},
        Listener{"--metrics-listen", o.metrics_listen, false}}) {
    if (l.address.empty() || IsLoopback(l.address)) continue;
    if (!o.tls.enabled()) {
      spdlog::warn(
          "{} {} is reachable from other hosts without TLS: prompts, answers{} cross the "
          "network in clear text (--tls-cert, --tls-key)",
          l.flag, l.address, l.serves_api && keys ? " and API keys" : "");
    }
    if (l.serves_api && !keys) {
      spdlog::warn(
          "{} {} is reachable from other hosts without API keys: anyone who reaches it can "
          "generate and use any session (--api-keys-file)",
          l.flag, l.address);
    }
  }
}

// Plain text, or TLS from the checked files (clients must present a certificate signed by
// the client CA when one is given).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcCredentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  TG_ASSIGN_OR_RETURN(TlsPem pem, ReadTlsFiles(tls));
  grpc::SslServerCredentialsOptions ssl(
      pem.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = pem.client_ca;
  ssl.pem_key_cert_pairs.push_back({pem.private_key, pem.cert_chain});
  return grpc::SslServerCredentials(ssl);
}

// Both HTTP APIs on one listener. httplib keeps one pre-routing (API key) and one error
// handler per server: each request's path picks the API that checks its key and shapes its
// errors.
void AddHttpApis(httplib::Server& http, openai::OpenAiApi* openai,
                 anthropic::AnthropicApi* anthropic, std::function<Readiness()> readiness) {
  openai->AddRoutes(http);
  anthropic->AddRoutes(http);
  AddProbeRoutes(http, std::move(readiness));
  http.set_pre_routing_handler(
      [openai, anthropic](const httplib::Request& req, httplib::Response& res) {
        if (IsProbeRoute(req.path)) return httplib::Server::HandlerResponse::Unhandled;
        const bool refused = anthropic::AnthropicApi::Serves(req.path)
                                 ? anthropic->RefuseUnauthenticated(req, res)
                                 : openai->RefuseUnauthenticated(req, res);
        return refused ? httplib::Server::HandlerResponse::Handled
                       : httplib::Server::HandlerResponse::Unhandled;
      });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (anthropic::AnthropicApi::Serves(req.path)) {
      anthropic::AnthropicApi::ErrorPage(req, res);
    } else {
      openai::OpenAiApi::ErrorPage(req, res);
    }
  });
}

}  // namespace

TextgenServer::TextgenServer(const ServerOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<TextgenServer>> TextgenServer::Start(const ServerOptions& options) {
  TG_RETURN_IF_ERROR(CheckTlsFiles(options.tls));
  TG_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      GrpcCredentials(options.tls));
  auto s = std::unique_ptr<TextgenServer>(new TextgenServer(options));
  if (!options.api_keys_file.empty()) {
    TG_ASSIGN_OR_RETURN(s->api_keys_, ApiKeys::Load(options.api_keys_file));
    spdlog::info("API keys: {} from {}", s->api_keys_.size(), options.api_keys_file);
  }
  WarnIfExposed(options, s->api_keys_.enabled());
  if (!options.state_store.empty()) {
    // An unreachable Redis is not a refusal: the journal starts degraded and reconnects.
    state::RedisJournalOptions journal;
    journal.url = options.state_store;
    TG_ASSIGN_OR_RETURN(std::unique_ptr<state::RedisSessionJournal> redis,
                        state::RedisSessionJournal::Open(journal));
    spdlog::info("sessions: shared in Redis at {}", redis->address());
    s->journal_ = std::move(redis);
  } else if (!options.state_dir.empty()) {
    // Before listening: a refusal (another server on the directory, a corrupted or too new
    // database) ends the start at once.
    state::SqliteJournalOptions journal;
    journal.dir = options.state_dir;
    journal.sync_full = options.state_sync_full;
    journal.reset = options.state_reset;
    TG_ASSIGN_OR_RETURN(s->journal_, state::SqliteSessionJournal::Open(journal));
  }
  s->metrics_.SetStateStoreSource([server = s.get()] { return server->state_store_degraded(); });
  s->service_ = std::make_unique<TextGenerationService>(
      options.limits, options.engine.kv_block_size, &s->api_keys_, &s->metrics_);
  s->metrics_.SetStatsSource([server = s.get()]() -> std::optional<EngineStats> {
    absl::MutexLock lock(&server->engine_mu_);
    if (server->engine_ == nullptr) return std::nullopt;
    return server->engine_->Stats();
  });
  const char* scheme = options.tls.enabled() ? "https" : "http";
  if (!options.metrics_listen.empty()) {
    HttpListenerOptions metrics;
    // A scrape is quick, and idle or slow connections hold no worker (HttpFront): a few
    // workers serve Prometheus and a curl or two at once.
    metrics.threads = kMetricsThreads;
    metrics.timeout = options.http_timeout;
    metrics.max_connections = options.http_max_connections;
    metrics.tls = options.tls;
    TG_ASSIGN_OR_RETURN(s->metrics_http_,
                        MetricsHttpServer::Start(options.metrics_listen, metrics,
                                                 [m = &s->metrics_] { return m->Render(); }));
    spdlog::info("metrics on {}://{}/metrics (port {})", scheme, options.metrics_listen,
                 s->metrics_http_->port());
  }

  if (!options.http_listen.empty()) {
    s->api_ = std::make_unique<openai::OpenAiApi>(options.limits, &s->api_keys_, &s->metrics_);
    s->anthropic_ =
        std::make_unique<anthropic::AnthropicApi>(options.limits, &s->api_keys_, &s->metrics_);
    HttpListenerOptions http;
    http.threads = options.http_threads > 0 ? options.http_threads
                                            : options.engine.max_active_requests +
                                                  options.engine.max_queued_requests + 16;
    http.timeout = options.http_timeout;
    http.max_connections = options.http_max_connections;
    // Room for a prompt of the largest size allowed, JSON-escaped, and the rest of the body.
    http.max_body_bytes =
        std::max<size_t>(http.max_body_bytes, 2 * options.limits.max_prompt_bytes + (1 << 20));
    http.tls = options.tls;
    absl::StatusOr<std::unique_ptr<HttpListener>> listener = HttpListener::Start(
        options.http_listen, "the HTTP API (--http-listen)", http,
        [openai = s->api_.get(), anthropic = s->anthropic_.get(),
         server = s.get()](httplib::Server& h) {
          AddHttpApis(h, openai, anthropic, [server] { return server->readiness(); });
        });
    if (!listener.ok()) {
      if (s->metrics_http_ != nullptr) s->metrics_http_->Stop();
      return listener.status();
    }
    s->api_http_ = *std::move(listener);
    spdlog::info(
        "OpenAI-compatible API, Anthropic Messages API and chat page on {}://{}/ (port {}, {} "
        "workers)",
        scheme, options.http_listen, s->api_http_->port(), http.threads);
  }

  // Process-wide switch; must precede the builder. (Reflection is registered by main: its
  // library carries generated descriptors that must not be linked into every user of this one.)
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // gRPC binds with SO_REUSEPORT by default: a second server on the same port would start and
  // silently take half the connections. A port in use must be an error naming it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  // Reflection is a synchronous service; its pollers notice a shutdown only when their
  // completion-queue wait times out (10 s by default), which would delay every exit.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 200);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->shut_down_ = true;
    if (s->server_ != nullptr) s->server_->Shutdown();
    if (s->metrics_http_ != nullptr) s->metrics_http_->Stop();
    if (s->api_http_ != nullptr) s->api_http_->Stop();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen,
                                               " for gRPC (--listen): the port is in use or the "
                                               "address is not this host's; choose another"));
  }
  s->SetState(State::kLoading);
  spdlog::info("listening on {} (port {}{}{}); loading {}", options.listen, s->port_,
               options.tls.enabled() ? ", TLS" : "",
               options.tls.client_ca.empty() ? "" : " with client certificates",
               options.engine.model_path);
  return s;
}

absl::Status TextgenServer::Load() {
  TG_RETURN_IF_ERROR(LogKernels());
  spdlog::info("batch-invariant matmuls: {}",
               options_.engine.model.llama.linear.batch_invariant ? "on" : "off");
  const auto load_start = std::chrono::steady_clock::now();
  EngineOptions engine_options = options_.engine;
  engine_options.session_journal = journal_;
  TG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(engine_options));
  const ModelConfig& c = engine->model().config();
  spdlog::info(
      "loaded {} ({}, {} layers, vocab {}, context {}, {}) in {:.0f} ms",
      options_.engine.model_path, engine->model().format(), c.n_layers, c.n_vocab, c.n_ctx,
      DTypeName(c.weight_type),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count());
  const std::string served = std::filesystem::path(options_.engine.model_path).filename().string();
  metrics_.SetModel(served, c.name);
  const EngineStats stats = engine->Stats();
  // Routers match the model name that clients send: the API's model id.
  metrics_.SetRouterInfo(ModelId(options_.engine.model_path), options_.engine.kv_block_size,
                         stats.kv_blocks_total, KvTypeName(engine->kv_type()),
                         options_.engine.prefix_cache);
  spdlog::info("serving {} on {} (port {}); KV cache {} blocks of {} tokens ({})", kServiceName,
               options_.listen, port_, stats.kv_blocks_total, options_.engine.kv_block_size,
               KvTypeName(engine->kv_type()));
  TG_RETURN_IF_ERROR(SetUpChat(*engine));
  loaded_engine_ = std::move(engine);
  return absl::OkStatus();
}

void TextgenServer::Serve() {
  if (loaded_engine_ == nullptr) return;
  service_->SetEngine(loaded_engine_.get());
  {
    absl::MutexLock lock(&engine_mu_);
    engine_ = std::move(loaded_engine_);
  }
  SetState(State::kServing);
}

absl::Status TextgenServer::SetUpChat(Engine& engine) {
  absl::StatusOr<ModelChatTemplate> t =
      LoadModelChatTemplate(engine.model(), options_.chat_template);
  if (t.ok()) {
    spdlog::info("chat template: {}",
                 options_.chat_template.empty() ? "the model's" : options_.chat_template);
  } else if (!options_.chat_template.empty()) {
    // Asked for explicitly: serving without it would fail every Chat later.
    return absl::InvalidArgumentError(
        absl::StrCat("--chat-template ", options_.chat_template, ": ", t.status().message()));
  } else if (absl::IsNotFound(t.status())) {
    spdlog::info("no chat template ({}): Chat is unavailable", t.status().ToString());
  } else {
    // The model's own template is beyond the interpreter: Generate still serves.
    spdlog::warn(
        "the model's chat template cannot be used ({}); Chat is unavailable until "
        "--chat-template gives one",
        t.status().ToString());
    t = absl::FailedPreconditionError(
        absl::StrCat("the model's chat template cannot be used (", t.status().message(),
                     "); start the server with --chat-template FILE"));
  }
  preparer_ =
      std::make_unique<PromptPreparer>(std::move(t), engine.model().tokenizer(), options_.chat);
  if (api_ != nullptr) {
    api_->SetEngine(&engine, ModelId(options_.engine.model_path), preparer_.get());
    anthropic_->SetEngine(&engine, ModelId(options_.engine.model_path), preparer_.get());
  }
  service_->SetChatPrompter(std::make_unique<ChatPrompter>(preparer_.get()));
  return absl::OkStatus();
}

Readiness TextgenServer::readiness() const {
  Readiness r;
  switch (state_.load()) {
    case State::kLoading:
      r.status = "loading";
      break;
    case State::kServing:
      r.status = "ready";
      break;
    case State::kDraining:
      r.status = "draining";
      break;
  }
  r.state_store = journal_ == nullptr ? "off" : journal_->degraded() ? "degraded" : "ok";
  return r;
}

void TextgenServer::SetState(State state) {
  state_ = state;
  const bool serving = state == State::kServing;
  metrics_.SetServing(serving);
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  // "" is the server as a whole (what most probes ask about).
  health->SetServingStatus("", serving);
  health->SetServingStatus(kServiceName, serving);
}

TextgenServer::~TextgenServer() { Shutdown(absl::ZeroDuration()); }

void TextgenServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + grace;
  if (api_ != nullptr) api_->StopAccepting();
  if (anthropic_ != nullptr) anthropic_->StopAccepting();
  if (server_ != nullptr) {
    SetState(State::kDraining);
    service_->StartShutdown(absl::ToChronoTime(deadline));
    // Returns once every call has finished: in-flight streams may complete within the grace,
    // after it gRPC cancels them (their reactors cancel the engine requests).
    server_->Shutdown(absl::ToChronoTime(deadline));
    server_->Wait();
    // A long prompt's Submit may still be queued although its stream has ended.
    service_->StopPromptWork();
    spdlog::debug("gRPC server stopped");
  }
  // The same grace for the HTTP API's completions, then cancelled; Stop waits for its workers.
  if (api_ != nullptr) api_->Drain(deadline);
  if (anthropic_ != nullptr) anthropic_->Drain(deadline);
  if (api_http_ != nullptr) {
    api_http_->Stop();
    spdlog::debug("HTTP API stopped");
  }
  // Scrapes answer until here (a drain is worth watching).
  if (metrics_http_ != nullptr) metrics_http_->Stop();
  // Ends whatever the engine still runs (nothing listens any more).
  std::unique_ptr<Engine> engine;
  {
    absl::MutexLock lock(&engine_mu_);
    engine = std::move(engine_);
  }
  engine.reset();
  spdlog::debug("engine stopped");
}

}  // namespace textgen::server
