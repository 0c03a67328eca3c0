// textgen-server: the gRPC front end. The only place that reads flags and the environment.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/textgen_server.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

constexpr char kUsage[] = R"(Usage: textgen-server [flags]

Serves textgen.v1.TextGeneration over gRPC (plus grpc.health.v1.Health and server reflection).
Flags take a value as "--flag VALUE" or "--flag=VALUE". Every flag can also be set by an
environment variable: TEXTGEN_ and the flag's name in capitals with '_' for '-' (--model ->
TEXTGEN_MODEL, --kv-cache-mib -> TEXTGEN_KV_CACHE_MIB, --metrics-listen ->
TEXTGEN_METRICS_LISTEN); an empty variable counts as unset, a flag on the command line wins.

Health reports NOT_SERVING while the model loads (TextGeneration RPCs are UNAVAILABLE then)
and while draining after SIGTERM, SERVING in between.

  --model PATH                 GGUF file or Hugging Face directory
                               (default $TEXTGEN_MODELS/stories260K.gguf, else
                               models/stories260K.gguf)
  --listen HOST:PORT           address to listen on (default 127.0.0.1:50051; port 0 = any)
  --metrics-listen HOST:PORT   serve Prometheus metrics at http://HOST:PORT/metrics
                               (default: off)
  --http-listen HOST:PORT      serve the OpenAI-compatible API (/v1/chat/completions,
                               /v1/completions, /v1/models) and the chat page (/) over
                               HTTP on this address (default: off; port 0 = any)
  --tls-cert FILE              PEM certificate (chain) to serve TLS with on every listener:
                               gRPC, --http-listen and --metrics-listen (default: plain
                               text); needs --tls-key. Checked at start: a missing file, a
                               key that is not the certificate's or an expired certificate
                               ends the start (exit 1)
  --tls-key FILE               PEM private key of --tls-cert (unencrypted; keep it 0600)
  --tls-client-ca FILE         PEM CA certificate(s): clients must present a certificate it
                               signed (mutual TLS); without one the handshake fails
  --api-keys-file FILE         API keys, one per line as "KEY [NAME]" (# comments); the
                               gRPC API then needs "authorization: Bearer KEY" metadata
                               (UNAUTHENTICATED otherwise) and /v1/... the same header
                               (HTTP 401). A session belongs to the key's NAME (or, without
                               one, the key's line) that created it: to any other it does not
                               exist (NOT_FOUND). Health, reflection, the chat page and
                               /metrics stay open (default: no keys, everything open)
  --chat-template FILE         Jinja chat template for the Chat RPC and
                               /v1/chat/completions, instead of the model's own (GGUF
                               tokenizer.chat_template / tokenizer_config.json); without
                               either, chat requests are refused (Chat: FAILED_PRECONDITION)
  --http-threads N             HTTP API workers; each streamed answer holds one (default 0:
                               --max-active + --max-queued + 16)
  --http-timeout SECONDS       an HTTP client that sends nothing, or reads nothing, for this
                               long is disconnected (default 10)
  --compute bf16|f32           matmul arithmetic: bf16 (fast, default) or f32 (exact, for
                               parity with other engines)
  --threads N                  compute threads (0 = chosen from the model size; default 0)
  --context N                  context length to serve, at most the model's trained length
                               (default: the trained length)
  --kv-type f32|bf16|auto      KV cache element type: bf16 halves the bytes attention reads
                               per token and doubles the tokens --kv-cache-mib holds; auto
                               (default) = bf16 with --compute bf16, f32 with --compute f32
  --kv-cache-mib N             KV cache pool size in MiB (default 1024)
  --kv-blocks N                KV cache pool size in blocks; overrides --kv-cache-mib
  --kv-block-size N            tokens per KV block (default 16)
  --max-queued N               requests waiting for admission before Generate fails with
                               RESOURCE_EXHAUSTED (default 64)
  --max-active N               requests decoded together in one batch (default 64)
  --max-step-tokens N          most tokens one forward pass runs (default 512): each step
                               runs every stream's next token, then prompts in chunks of
                               what remains, so a long prompt does not stall the others
  --prefix-cache on|off        automatic prefix caching (default on): full KV blocks stay
                               cached under their token prefix until the pool needs them, and
                               a prompt starting with cached blocks (a shared system prompt, a
                               resent conversation) shares them instead of prefilling them
  --max-sessions N             conversations kept at once (default 1024)
  --session-ttl SECONDS        an unused session is deleted after this long (default 600)
  --default-max-new-tokens N   used when a request leaves max_new_tokens at 0; such requests
                               stop at the context limit instead of failing (default 256)
  --max-max-new-tokens N       largest max_new_tokens a request may ask for (default 4096)
  --max-prompt-bytes N         most bytes of prompt text one request may send (Generate's
                               prompt, Chat's messages, Tokenize's text, the HTTP API's prompt
                               and messages); larger ones are refused (INVALID_ARGUMENT /
                               HTTP 400) before any tokenizing (default 1048576)
  --shutdown-grace SECONDS     on SIGTERM/SIGINT, in-flight streams get this long to finish
                               before they are cancelled (default 10)
  --log-level LEVEL            debug, info, warn or error (default info)
  --help                       this text
)";

struct Flags {
  ServerOptions options;
  spdlog::level::level_enum log_level = spdlog::level::info;
};

std::string DefaultModelPath() {
  const char* env = std::getenv("TEXTGEN_MODELS");
  if (env != nullptr && *env != '\0') return absl::StrCat(env, "/stories260K.gguf");
  return "models/stories260K.gguf";
}

// --kv-cache-mib -> TEXTGEN_KV_CACHE_MIB.
std::string EnvVarName(const std::string& flag) {
  std::string var = "TEXTGEN_";
  for (char c : flag.substr(2)) var += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return var;
}

[[noreturn]] void UsageError(const std::string& message) {
  std::fprintf(stderr, "textgen-server: %s\n(see --help)\n", message.c_str());
  std::exit(2);
}

int64_t ParseInt(const std::string& flag, const std::string& value, int64_t min, int64_t max) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < min || v > max) {
    UsageError(
        absl::StrCat(flag, " must be an integer in [", min, ", ", max, "], got \"", value, "\""));
  }
  return v;
}

double ParseSeconds(const std::string& flag, const std::string& value) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v >= 0) || v > 1e9) {
    UsageError(absl::StrCat(flag, " must be a number of seconds >= 0, got \"", value, "\""));
  }
  return v;
}

// HOST:PORT with a port in [0, 65535] (gRPC would otherwise take 99999 modulo 65536).
std::string ParseListen(const std::string& flag, const std::string& value) {
  const size_t colon = value.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    UsageError(
        absl::StrCat(flag, " must be HOST:PORT with a port in [0, 65535], got \"", value, "\""));
  }
  return value;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  ServerOptions& o = f.options;
  o.engine.model_path = DefaultModelPath();
  o.engine.model.llama.linear.compute = ops::LinearCompute::kBf16;  // fast unless asked
  constexpr int64_t kIntMax = 0x7fffffff;
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> setters = {
      {"--model", [&](auto&, auto& v) { o.engine.model_path = v; }},
      {"--listen", [&](auto& n, auto& v) { o.listen = ParseListen(n, v); }},
      {"--metrics-listen", [&](auto& n, auto& v) { o.metrics_listen = ParseListen(n, v); }},
      {"--http-listen", [&](auto& n, auto& v) { o.http_listen = ParseListen(n, v); }},
      {"--tls-cert", [&](auto&, auto& v) { o.tls.cert = v; }},
      {"--tls-key", [&](auto&, auto& v) { o.tls.key = v; }},
      {"--tls-client-ca", [&](auto&, auto& v) { o.tls.client_ca = v; }},
      {"--api-keys-file", [&](auto&, auto& v) { o.api_keys_file = v; }},
      {"--chat-template", [&](auto&, auto& v) { o.chat_template = v; }},
      {"--http-threads",
       [&](auto& n, auto& v) { o.http_threads = static_cast<int>(ParseInt(n, v, 0, 4096)); }},
      {"--http-timeout",
       [&](auto& n, auto& v) {
         const double seconds = ParseSeconds(n, v);
         if (seconds < 1) UsageError(absl::StrCat(n, " must be at least 1 second, got ", v));
         o.http_timeout = absl::Seconds(seconds);
       }},
      {"--compute",
       [&](auto& n, auto& v) {
         if (v != "bf16" && v != "f32") {
           UsageError(absl::StrCat(n, " must be bf16 or f32, got \"", v, "\""));
         }
         o.engine.model.llama.linear.compute =
             v == "bf16" ? ops::LinearCompute::kBf16 : ops::LinearCompute::kF32;
       }},
      {"--context",
       [&](auto& n, auto& v) {
         o.engine.model.llama.n_ctx = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--threads",
       [&](auto& n, auto& v) {
         o.engine.model.threads = static_cast<int>(ParseInt(n, v, 0, 1024));
       }},
      {"--kv-type",
       [&](auto& n, auto& v) {
         if (v == "auto") {
           o.engine.kv_type.reset();
         } else if (v == "f32" || v == "bf16") {
           o.engine.kv_type = v == "bf16" ? KvType::kBf16 : KvType::kF32;
         } else {
           UsageError(absl::StrCat(n, " must be f32, bf16 or auto, got \"", v, "\""));
         }
       }},
      {"--kv-cache-mib",
       [&](auto& n, auto& v) { o.engine.kv_cache_mib = ParseInt(n, v, 1, 1 << 24); }},
      {"--kv-blocks",
       [&](auto& n, auto& v) {
         o.engine.kv_blocks = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--kv-block-size",
       [&](auto& n, auto& v) {
         o.engine.kv_block_size = static_cast<int>(ParseInt(n, v, 1, 4096));
       }},
      {"--max-queued",
       [&](auto& n, auto& v) {
         o.engine.max_queued_requests = static_cast<int>(ParseInt(n, v, 0, kIntMax));
       }},
      {"--max-active",
       [&](auto& n, auto& v) {
         o.engine.max_active_requests = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--max-step-tokens",
       [&](auto& n, auto& v) {
         o.engine.max_step_tokens = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--prefix-cache",
       [&](auto& n, auto& v) {
         if (v != "on" && v != "off") {
           UsageError(absl::StrCat(n, " must be on or off, got \"", v, "\""));
         }
         o.engine.prefix_cache = v == "on";
       }},
      {"--max-sessions",
       [&](auto& n, auto& v) {
         o.engine.max_sessions = static_cast<int>(ParseInt(n, v, 0, kIntMax));
       }},
      {"--session-ttl",
       [&](auto& n, auto& v) { o.engine.session_ttl = absl::Seconds(ParseSeconds(n, v)); }},
      {"--default-max-new-tokens",
       [&](auto& n, auto& v) {
         o.limits.default_max_new_tokens = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--max-max-new-tokens",
       [&](auto& n, auto& v) {
         o.limits.max_max_new_tokens = static_cast<int>(ParseInt(n, v, 1, kIntMax));
       }},
      {"--max-prompt-bytes",
       [&](auto& n, auto& v) {
         o.limits.max_prompt_bytes = static_cast<size_t>(ParseInt(n, v, 1, int64_t{1} << 30));
       }},
      {"--shutdown-grace",
       [&](auto& n, auto& v) { o.shutdown_grace = absl::Seconds(ParseSeconds(n, v)); }},
      {"--log-level",
       [&](auto& n, auto& v) {
         if (v == "debug") {
           f.log_level = spdlog::level::debug;
         } else if (v == "info") {
           f.log_level = spdlog::level::info;
         } else if (v == "warn") {
           f.log_level = spdlog::level::warn;
         } else if (v == "error") {
           f.log_level = spdlog::level::err;
         } else {
           UsageError(absl::StrCat(n, " must be debug, info, warn or error, got \"", v, "\""));
         }
       }},
  };
  // The environment first, so that the command line overrides it; errors name the variable.
  for (const auto& [flag, set] : setters) {
    const std::string var = EnvVarName(flag);
    const char* value = std::getenv(var.c_str());
    if (value != nullptr && *value != '\0') set(var, value);
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    auto it = setters.find(arg);
    if (it == setters.end()) UsageError(absl::StrCat("unknown flag ", arg));
    if (!has_value) {
      if (i + 1 >= argc) UsageError(absl::StrCat(arg, " needs a value"));
      value = argv[++i];
    }
    it->second(arg, value);
  }
  if (o.limits.default_max_new_tokens > o.limits.max_max_new_tokens) {
    UsageError(absl::StrCat("--default-max-new-tokens (", o.limits.default_max_new_tokens,
                            ") must not exceed --max-max-new-tokens (", o.limits.max_max_new_tokens,
                            ")"));
  }
  return f;
}

int Main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  spdlog::set_level(flags.log_level);

  // Block the shutdown signals in every thread (threads inherit the mask, so this comes before
  // the engine and gRPC start theirs); this thread then takes them synchronously with sigwait,
  // so no work ever runs inside a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) {
    spdlog::error("cannot block SIGTERM/SIGINT");
    return 1;
  }
  // Debian's cpp-httplib writes to sockets without MSG_NOSIGNAL: a client that disconnects
  // mid-answer must fail that write (EPIPE), not kill the process.
  ::signal(SIGPIPE, SIG_IGN);

  // Registers the reflection service with every server built from here on.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto server = TextgenServer::Start(flags.options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return 1;
  }
  // The model loads on its own thread while this one keeps taking signals: probes see
  // NOT_SERVING meanwhile, and a SIGTERM (e.g. a rollout during a long load) ends the process
  // at once: nothing is in flight, and loading cannot be interrupted.
  std::atomic<bool> load_done{false};
  absl::Status loaded;
  std::thread loader([&] {
    loaded = (*server)->Load();
    load_done.store(true);
  });
  int sig = 0;
  const timespec poll = {0, 50 * 1000 * 1000};  // how soon the end of the load is noticed
  while (!load_done.load()) {
    sig = sigtimedwait(&signals, nullptr, &poll);
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("{} received while loading: exiting without serving", strsignal(sig));
      spdlog::shutdown();  // flushes the log
      std::_Exit(0);       // the loader thread cannot be stopped or joined early
    }
  }
  loader.join();
  if (!loaded.ok()) {
    spdlog::error("cannot load: {}", loaded.ToString());
    return 1;
  }
  while (sigwait(&signals, &sig) != 0) {
  }
  spdlog::info("{} received: draining (grace {})", strsignal(sig),
               absl::FormatDuration(flags.options.shutdown_grace));
  (*server)->Shutdown(flags.options.shutdown_grace);
  server->reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace textgen::server

int main(int argc, char** argv) { return textgen::server::Main(argc, argv); }
