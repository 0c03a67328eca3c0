// Everything textgen-server is configured with; main fills it from flags and the environment.
#ifndef TEXTGEN_SERVER_SERVER_OPTIONS_H_
#define TEXTGEN_SERVER_SERVER_OPTIONS_H_

#include <string>

#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "server/pipeline/prompt_preparer.h"
#include "server/request_convert.h"
#include "server/tls_files.h"

namespace textgen::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // HOST:PORT; port 0 picks a free one
  // HOST:PORT for Prometheus' GET /metrics over HTTP; empty = no metrics endpoint.
  std::string metrics_listen;
  // HOST:PORT for the OpenAI-compatible HTTP API (/v1/...) and the chat page (/); empty = off.
  std::string http_listen;
  // Worker threads of the HTTP API; each streamed response holds one for its whole length.
  // 0: max_active + max_queued requests + 16, so every request the engine could hold gets a
  // worker (and those beyond a quick 429) while a few are left for models and page requests.
  int http_threads = 0;
  // An HTTP connection that has not sent a whole request header this long after connecting
  // (or after its previous response), or sends nothing or reads nothing for this long while
  // served, is disconnected. Waiting connections hold no worker.
  absl::Duration http_timeout = absl::Seconds(10);
  // Open connections per HTTP listener (API, metrics); beyond, the longest-waiting idle one is
  // closed.
  int http_max_connections = 512;
  // TLS on every listener (gRPC, the HTTP API, metrics); off without a certificate. With
  // tls.client_ca, clients must present a certificate it signed (mutual TLS).
  TlsFiles tls;
  // A file of API keys (see api_keys.h) the gRPC and HTTP APIs then require; empty = open.
  // Health, reflection, the chat page and /metrics stay open either way.
  std::string api_keys_file;
  EngineOptions engine;
  // Durable sessions: a directory for DIR/sessions.sqlite3 (state/sqlite_session_journal.h);
  // empty = sessions in memory only. state_sync_full: fsync every committed turn (survives power
  // loss) rather than leave it to the OS (survives a process crash). state_reset: move an
  // existing database aside first.
  std::string state_dir;
  // Sessions shared by every server on one Redis (state/redis_session_journal.h):
  // "redis://HOST:PORT[/DB]", which replaces DIR/sessions.sqlite3 (state_dir, if set, then
  // holds only the KV disk tier); empty = the SQLite store or memory.
  std::string state_store;
  bool state_sync_full = true;
  bool state_reset = false;
  // A Jinja chat template file for the Chat RPC and /v1/chat/completions, overriding the
  // model's own; empty = the model's.
  std::string chat_template;
  // Thinking models: the default reasoning format and budget of chat requests (see
  // server/pipeline/prompt_preparer.h).
  PromptPreparerOptions chat;
  RequestLimits limits;
  // On SIGTERM, in-flight streams get this long to finish before they are cancelled.
  absl::Duration shutdown_grace = absl::Seconds(10);
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_SERVER_OPTIONS_H_
