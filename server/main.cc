// textgen-server: the gRPC front end. The only place that reads flags and the environment.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/flags.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_select.h"
#include "server/textgen_server.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

constexpr char kDescription[] = R"(Usage: textgen-server [flags]

Serves textgen.v1.TextGeneration over gRPC (plus grpc.health.v1.Health and server reflection).
Flags take a value as "--flag VALUE" or "--flag=VALUE". Every flag can also be set by an
environment variable: TEXTGEN_ and the flag's name in capitals with '_' for '-' (--model ->
TEXTGEN_MODEL, --kv-cache-mib -> TEXTGEN_KV_CACHE_MIB, --metrics-listen ->
TEXTGEN_METRICS_LISTEN); an empty variable counts as unset, a flag on the command line wins.

Health reports NOT_SERVING while the model loads (TextGeneration RPCs are UNAVAILABLE then)
and while draining after SIGTERM, SERVING in between.)";

struct Flags {
  ServerOptions options;
  spdlog::level::level_enum log_level = spdlog::level::info;
};

std::string DefaultModelPath() {
  const char* env = std::getenv("TEXTGEN_MODELS");
  if (env != nullptr && *env != '\0') return absl::StrCat(env, "/stories260K.gguf");
  return "models/stories260K.gguf";
}

constexpr int64_t kIntMax = 0x7fffffff;

// Where to listen, TLS, keys, chat template and the HTTP API's workers.
void AddServingFlags(cli::FlagSet& f, ServerOptions& o) {
  f.Add("--model", &o.engine.model_path, cli::Text(), "PATH",
        "GGUF file or Hugging Face directory\n(default $TEXTGEN_MODELS/stories260K.gguf, "
        "else\nmodels/stories260K.gguf)");
  f.Add("--listen", &o.listen, cli::HostPort(), "HOST:PORT",
        "address to listen on (default 127.0.0.1:50051; port 0 = any)");
  f.Add("--metrics-listen", &o.metrics_listen, cli::HostPort(), "HOST:PORT",
        "serve Prometheus metrics at http://HOST:PORT/metrics\n(default: off)");
  f.Add("--http-listen", &o.http_listen, cli::HostPort(), "HOST:PORT",
        "serve the OpenAI-compatible API (/v1/chat/completions,\n/v1/completions, /v1/models) "
        "and the chat page (/) over\nHTTP on this address (default: off; port 0 = any)");
  f.Add("--tls-cert", &o.tls.cert, cli::Text(), "FILE",
        "PEM certificate (chain) to serve TLS with on every listener:\ngRPC, --http-listen and "
        "--metrics-listen (default: plain\ntext); needs --tls-key. Checked at start: a missing "
        "file, a\nkey that is not the certificate's or an expired certificate\nends the start "
        "(exit 1)");
  f.Add("--tls-key", &o.tls.key, cli::Text(), "FILE",
        "PEM private key of --tls-cert (unencrypted; keep it 0600)");
  f.Add("--tls-client-ca", &o.tls.client_ca, cli::Text(), "FILE",
        "PEM CA certificate(s): clients must present a certificate it\nsigned (mutual TLS); "
        "without one the handshake fails");
  f.Add("--api-keys-file", &o.api_keys_file, cli::Text(), "FILE",
        "API keys, one per line as \"KEY [NAME]\" (# comments); the\ngRPC API then needs "
        "\"authorization: Bearer KEY\" metadata\n(UNAUTHENTICATED otherwise) and /v1/... the "
        "same header\n(HTTP 401). A session belongs to the key's NAME (or, without\none, the "
        "key's line) that created it: to any other it does not\nexist (NOT_FOUND). Health, "
        "reflection, the chat page and\n/metrics stay open (default: no keys, everything open)");
  f.Add("--chat-template", &o.chat_template, cli::Text(), "FILE",
        "Jinja chat template for the Chat RPC and\n/v1/chat/completions, instead of the model's "
        "own (GGUF\ntokenizer.chat_template / tokenizer_config.json); without\neither, chat "
        "requests are refused (Chat: FAILED_PRECONDITION)");
  f.AddWith<std::string>(
      "--reasoning-format", cli::OneOf({"separate", "raw"}), "separate|raw",
      "thinking models' reasoning (<think>...</think>): separate\n(default: reasoning_content / "
      "reasoning_text apart from the\nanswer) or raw (left in the answer's text); a request "
      "may ask\nfor either",
      [&o](const std::string& v) {
        o.chat.default_reasoning_format =
            v == "raw" ? ReasoningFormat::kRaw : ReasoningFormat::kSeparate;
      });
  f.AddWith<int>("--reasoning-budget", cli::Int<int>(-1, kIntMax), "N",
                 "most reasoning tokens of a thinking model's answer; then the\nreasoning block is "
                 "closed and the answer begins (default -1: no\nlimit; a request may set its own)",
                 [&o](int v) {
                   if (v >= 0) o.chat.default_reasoning_budget = v;
                 });
  f.Add("--http-threads", &o.http_threads, cli::Int<int>(0, 4096), "N",
        "HTTP API workers; each streamed answer holds one (default 0:\n--max-active + "
        "--max-queued + 16)");
  f.Add("--http-timeout", &o.http_timeout, cli::Seconds(1), "SECONDS",
        "an HTTP connection that has not sent a whole request header\nthis long after "
        "connecting (or after its last response), or\nthat sends or reads nothing for this "
        "long, is closed (default 10)");
  f.Add("--http-max-connections", &o.http_max_connections, cli::Int<int>(1, 1 << 20), "N",
        "open connections per HTTP listener (API, metrics); one more\ncloses the one idle "
        "longest (default 512)");
}

// Arithmetic, threads, context and the KV cache pool.
void AddEngineFlags(cli::FlagSet& f, EngineOptions& e) {
  f.AddWith<std::string>(
      "--compute", cli::OneOf({"bf16", "f32"}), "bf16|f32",
      "matmul arithmetic: bf16 (fast, default) or f32 (exact, for\nparity with other engines)",
      [&e](const std::string& v) {
        e.model.llama.linear.compute =
            v == "bf16" ? ops::LinearCompute::kBf16 : ops::LinearCompute::kF32;
      });
  // auto (the default): on where the invariant kernels cost nothing measurable (see
  // ops::BatchInvariantByDefault), off where they would slow prefill down.
  e.model.llama.linear.batch_invariant = ops::BatchInvariantByDefault();
  f.Add("--batch-invariant", &e.model.llama.linear.batch_invariant,
        cli::AutoOnOff(ops::BatchInvariantByDefault), "auto|on|off",
        "on: a request's tokens do not depend on what else runs in the\nsame step (every matmul "
        "row computed alone, in a fixed order);\noff: prefill chunks use oneDNN, faster on some "
        "CPUs, but a\ngreedy or seeded request may then change its answer with the\nserver's "
        "load; auto (default): on at the avx512, avx512vnni and\navx512bf16 kernel levels, off "
        "at avx2 and amx (docs/kernels.md:\nBatch invariance)");
  f.AddWith<std::string>(
      "--kernel-select", cli::OneOf({"measure", "table"}), "measure|table",
      "measure (default): after loading, time each weight format's\nkernels at every level this "
      "CPU runs and keep the fastest (only\nformats whose levels give the same bytes); table: the "
      "highest\nlevel (docs/kernels.md: Kernels chosen by measurement)",
      [&e](const std::string& v) {
        e.model.llama.kernel_select =
            v == "table" ? ops::KernelSelectMode::kTable : ops::KernelSelectMode::kMeasure;
      });
  f.Add("--threads", &e.model.threads, cli::Int<int>(0, 1024), "N",
        "compute threads (0 = chosen from the model size; default 0)");
  f.Add("--context", &e.model.llama.n_ctx, cli::Int<int>(1, kIntMax), "N",
        "context length to serve, at most the model's trained length\n(default: the trained "
        "length)");
  f.AddWith<std::string>(
      "--kv-type", cli::OneOf({"f32", "bf16", "auto"}), "f32|bf16|auto",
      "KV cache element type: bf16 halves the bytes attention reads\nper token and doubles the "
      "tokens --kv-cache-mib holds; auto\n(default) = bf16 with --compute bf16, f32 with "
      "--compute f32",
      [&e](const std::string& v) {
        if (v == "auto") {
          e.kv_type.reset();
        } else {
          e.kv_type = v == "bf16" ? KvType::kBf16 : KvType::kF32;
        }
      });
  f.Add("--kv-cache-mib", &e.kv_cache_mib, cli::Int<int64_t>(1, 1 << 24), "N",
        "KV cache pool size in MiB (default 1024)");
  f.Add("--kv-blocks", &e.kv_blocks, cli::Int<int>(1, kIntMax), "N",
        "KV cache pool size in blocks; overrides --kv-cache-mib");
  f.Add("--kv-block-size", &e.kv_block_size, cli::Int<int>(1, 4096), "N",
        "tokens per KV block (default 16)");
}

// Admission, batching, sessions and per-request limits.
void AddLimitFlags(cli::FlagSet& f, ServerOptions& o) {
  EngineOptions& e = o.engine;
  f.Add("--max-queued", &e.max_queued_requests, cli::Int<int>(0, kIntMax), "N",
        "requests waiting for admission before Generate fails with\nRESOURCE_EXHAUSTED "
        "(default 64)");
  f.Add("--max-active", &e.max_active_requests, cli::Int<int>(1, kIntMax), "N",
        "requests decoded together in one batch (default 64)");
  f.Add("--step-token-budget", &e.step_token_budget, cli::Int<int>(1, kIntMax), "N",
        "most tokens one forward pass runs while streams decode\n(default 96): each step runs "
        "every stream's next token,\nthen prompts in chunks of what remains, so a new prompt "
        "does\nnot stall the running streams");
  f.Add("--max-step-tokens", &e.step_token_budget, cli::Int<int>(1, kIntMax), "N",
        "the older name of --step-token-budget");
  f.Add("--idle-step-tokens", &e.idle_step_tokens, cli::Int<int>(1, kIntMax), "N",
        "most tokens one forward pass runs when no stream decodes\n(default 512; at least "
        "--step-token-budget): prompts then\nstall nobody and run in larger chunks");
  f.AddWith<std::string>(
      "--speculative", cli::OneOf({"off", "ngram", "draft-model"}), "off|ngram|draft-model",
      "speculative decoding of requests that do not ask (default\noff): ngram drafts the "
      "continuation of the text's latest\nearlier match in the prompt and answer, draft-model "
      "the\n--draft-model's greedy continuation; the target model\nverifies the drafts in one "
      "pass, so only the speed changes",
      [&o](const std::string& v) {
        o.limits.speculation.source = v == "ngram"         ? DraftSource::kNgram
                                      : v == "draft-model" ? DraftSource::kDraftModel
                                                           : DraftSource::kNone;
      });
  f.Add("--draft-model", &e.draft_model_path, cli::NonEmpty(), "PATH",
        "a small model with the target's vocabulary that drafts for\nspeculative decoding "
        "(GGUF or Hugging Face directory)");
  f.Add("--draft-kv-cache-mib", &e.draft_kv_cache_mib, cli::Int<int64_t>(1, 1 << 20), "N",
        "the draft model's KV cache pool in MiB (default 256)");
  f.Add("--speculative-tokens", &o.limits.speculation.max_draft_tokens,
        cli::Int<int>(1, kMaxSpeculativeTokens), "K",
        "tokens drafted per verification pass, at most (default 4)");
  f.AddWith<std::string>(
      "--speculative-adaptive", cli::OneOf({"on", "off"}), "on|off",
      "on (default): each pass drafts the number of tokens, 0 to K,\nthat gives the most tokens "
      "per unit of work, from the\nrequest's acceptance so far and the measured cost of a row;\n"
      "off: always K",
      [&o](const std::string& v) { o.limits.speculation.adaptive = v == "on"; });
  f.AddWith<std::string>(
      "--prefix-cache", cli::OneOf({"on", "off"}), "on|off",
      "automatic prefix caching (default on): full KV blocks stay\ncached under their token "
      "prefix until the pool needs them, and\na prompt starting with cached blocks (a shared "
      "system prompt, a\nresent conversation) shares them instead of prefilling them",
      [&e](const std::string& v) { e.prefix_cache = v == "on"; });
  f.Add("--kv-prefault", &e.kv_prefault, cli::AutoOrOnOff(), "auto|on|off",
        "commit the KV cache pool's memory at start instead of page by\npage as blocks are first "
        "used; auto (default): on with the\nprefix cache (which fills the whole pool in time "
        "anyway), off\nwithout it");
  f.Add("--kv-disk-gib", &e.kv_disk_gib, cli::Number(0, 1 << 20), "N",
        "KV disk tier: cached KV blocks that leave memory are written\nto DIR/kv of "
        "--state-dir, up to N GiB (least recently\nused file first out), and read back instead "
        "of recomputed;\nneeds --state-dir and the prefix cache (default 0: off)");
  f.Add("--max-sessions", &e.max_sessions, cli::Int<int>(0, kIntMax), "N",
        "conversations kept at once (default 1024)");
  f.Add("--session-ttl", &e.session_ttl, cli::Seconds(0), "SECONDS",
        "an unused session is deleted after this long (default 600)");
  f.Add("--state-dir", &o.state_dir, cli::NonEmpty(), "DIR",
        "keep sessions in DIR/sessions.sqlite3 (created if missing), so\nthat they outlive "
        "restarts and crashes: a turn is written before\nits last message is sent, and a "
        "restarted server continues\nevery session from its last such turn (default: memory "
        "only).\nOne server per directory (DIR/sessions.lock). Unwritable or\nfull: sessions "
        "stay in memory, with a warning and\ntextgen_state_store_degraded 1. The KV disk tier "
        "(--kv-disk-gib)\nkeeps its files in DIR/kv");
  f.Add("--state-store", &o.state_store, cli::NonEmpty(), "redis://HOST:PORT[/DB]",
        "keep sessions in Redis instead of DIR/sessions.sqlite3, so\nthat every server on it "
        "can continue any session (one whose\nKV it does not hold is recomputed from the stored "
        "tokens).\nUnreachable: sessions stay in memory, with a warning and\n"
        "textgen_state_store_degraded 1, until it reconnects; a turn\nnever waits for it. "
        "With --state-dir, DIR keeps only the KV\ndisk tier");
  f.AddWith<std::string>(
      "--state-sync", cli::OneOf({"full", "normal"}), "full|normal",
      "full (default): every turn is fsynced before its answer ends,\nso it survives a power "
      "loss or an OS crash; normal: written\nto the OS at once (survives the server's crash, "
      "kill -9, OOM)\nbut fsynced only now and then, so a machine's crash may lose\nthe latest "
      "turns (never a half-written one)",
      [&o](const std::string& v) { o.state_sync_full = v == "full"; });
  f.Flag("--state-reset", &o.state_reset,
         "move an existing DIR/sessions.sqlite3 aside (to\nsessions.sqlite3.broken-<time>) and "
         "start with no sessions: the\nway out of a corrupted database or one a newer release "
         "wrote");
  f.Add("--default-max-new-tokens", &o.limits.default_max_new_tokens, cli::Int<int>(1, kIntMax),
        "N",
        "used when a request leaves max_new_tokens at 0; such requests\nstop at the context "
        "limit instead of failing (default 256)");
  f.Add("--max-max-new-tokens", &o.limits.max_max_new_tokens, cli::Int<int>(1, kIntMax), "N",
        "largest max_new_tokens a request may ask for (default 4096)");
  f.Add("--max-prompt-bytes", &o.limits.max_prompt_bytes, cli::Int<size_t>(1, int64_t{1} << 30),
        "N",
        "most bytes of prompt text one request may send (Generate's\nprompt, Chat's messages, "
        "Tokenize's text, the HTTP API's prompt\nand messages); larger ones are refused "
        "(INVALID_ARGUMENT /\nHTTP 400) before any tokenizing (default 1048576)");
  f.Add("--shutdown-grace", &o.shutdown_grace, cli::Seconds(0), "SECONDS",
        "on SIGTERM/SIGINT, in-flight streams get this long to finish\nbefore they are "
        "cancelled (default 10)");
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  ServerOptions& o = flags.options;
  o.engine.model_path = DefaultModelPath();
  o.engine.model.llama.linear.compute = ops::LinearCompute::kBf16;  // fast unless asked
  cli::FlagSet f("textgen-server", kDescription, cli::Wording::kMustBe);
  f.SetEnvPrefix("TEXTGEN_");
  AddServingFlags(f, o);
  AddEngineFlags(f, o.engine);
  AddLimitFlags(f, o);
  f.AddWith<std::string>("--log-level", cli::OneOf({"debug", "info", "warn", "error"}), "LEVEL",
                         "debug, info, warn or error (default info)",
                         [&flags](const std::string& v) {
                           flags.log_level = v == "debug"   ? spdlog::level::debug
                                             : v == "warn"  ? spdlog::level::warn
                                             : v == "error" ? spdlog::level::err
                                                            : spdlog::level::info;
                         });
  f.Parse(argc, argv);
  if (o.limits.speculation.source == DraftSource::kDraftModel &&
      o.engine.draft_model_path.empty()) {
    f.Fail("--speculative draft-model needs --draft-model PATH");
  }
  if (o.state_reset && o.state_dir.empty()) f.Fail("--state-reset needs --state-dir DIR");
  if (!o.state_store.empty() && !absl::StartsWith(o.state_store, "redis://")) {
    f.Fail("--state-store must be redis://HOST:PORT[/DB]");
  }
  if (o.state_reset && !o.state_store.empty()) {
    f.Fail("--state-reset applies to DIR/sessions.sqlite3, which --state-store replaces");
  }
  // One directory for sessions and the KV disk tier.
  o.engine.state_dir = o.state_dir;
  if (!o.engine.draft_model_path.empty()) o.limits.asked_draft_source = DraftSource::kDraftModel;
  if (o.limits.default_max_new_tokens > o.limits.max_max_new_tokens) {
    f.Fail(absl::StrCat("--default-max-new-tokens (", o.limits.default_max_new_tokens,
                        ") must not exceed --max-max-new-tokens (", o.limits.max_max_new_tokens,
                        ")"));
  }
  return flags;
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
      // Flush only: spdlog::shutdown() would free the logger that the still running loader
      // may be logging through (a race ThreadSanitizer reported).
      spdlog::default_logger()->flush();
      std::_Exit(0);  // the loader thread cannot be stopped or joined early
    }
  }
  loader.join();
  if (!loaded.ok()) {
    spdlog::error("cannot load: {}", loaded.ToString());
    return 1;
  }
  // Only this thread starts serving, after the loop above: a SIGTERM it took there was before
  // any RPC could run; one from now on drains (a pending one is taken by the sigwait below).
  (*server)->Serve();
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
