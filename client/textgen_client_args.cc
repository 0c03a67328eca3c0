#include "client/textgen_client_args.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <utility>

namespace textgen::client {

namespace v1 = ::textgen::v1;

void UsageError(const std::string& message) {
  std::fprintf(stderr, "textgen-client: %s\n", message.c_str());
  std::exit(kExitUsage);
}

void AddConnectionFlags(cli::FlagSet& f, ConnectionOptions* o) {
  f.SetGroup("Connection");
  f.Add("--server", &o->server, cli::NonEmpty(), "HOST:PORT",
        "server address (default 127.0.0.1:50051)");
  f.Add("--timeout", &o->timeout_s, cli::Number(0), "SECONDS",
        "deadline of each call (default: none)");
  f.Add("--api-key", &o->api_key, cli::Text(), "KEY",
        "send \"authorization: Bearer KEY\" (default: $TEXTGEN_API_KEY;\nprefer the variable: "
        "the command line shows in ps)")
      ->envname("TEXTGEN_API_KEY");
  f.Add("--tls-ca", &o->tls_ca, cli::Text(), "FILE",
        "use TLS, verifying the server with these PEM CA certificates\n(default: plain text; "
        "also $TEXTGEN_TLS_CA)")
      ->envname("TEXTGEN_TLS_CA");
  f.Flag("--tls", &o->tls_system_roots,
         "use TLS, verifying the server with the system's CA certificates");
  f.Add("--tls-server-name", &o->tls_server_name, cli::Text(), "NAME",
        "the name the server's certificate must carry, if not the --server\nhost (also "
        "$TEXTGEN_TLS_SERVER_NAME)")
      ->envname("TEXTGEN_TLS_SERVER_NAME");
  f.Add("--tls-cert", &o->tls_cert, cli::Text(), "FILE",
        "mutual TLS: this client's PEM certificate (with --tls-key)");
  f.Add("--tls-key", &o->tls_key, cli::Text(), "FILE", "mutual TLS: its PEM private key");
  f.SetGroup("");
}

namespace {

// --name N: a uint32 field of the request.
void AddCount(cli::FlagSet& f, const std::string& name, const std::string& help,
              std::function<void(uint32_t)> set) {
  constexpr int64_t kU32 = std::numeric_limits<uint32_t>::max();
  f.AddWith<uint32_t>(name, cli::Int<uint32_t>(0, kU32), "N", help, std::move(set));
}

// --name X: a float field of the request.
void AddReal(cli::FlagSet& f, const std::string& name, const std::string& type,
             const std::string& help, std::function<void(float)> set) {
  f.AddWith<float>(name, cli::Float(), type, help, std::move(set));
}

// The sampling and beam flags.
void AddDecodingFlags(cli::FlagSet& f, v1::GenerateRequest& q) {
  f.AddWith<std::string>(
      "--method", cli::OneOf({"greedy", "sample", "beam"}), "M",
      "greedy|sample|beam (default: unset, the server infers it: beam\nwith --beams > 1, sample "
      "with a sampling flag, else greedy)",
      [&q](const std::string& m) {
        q.set_method(m == "beam" ? v1::BEAM : m == "sample" ? v1::SAMPLE : v1::GREEDY);
      });
  AddCount(f, "--max-new-tokens", "tokens to generate at most (0 = server default)",
           [&q](uint32_t n) { q.set_max_new_tokens(n); });
  AddCount(f, "--beams", "beam search width", [&q](uint32_t n) { q.set_num_beams(n); });
  AddReal(f, "--length-penalty", "A", "beam score = cum_logprob / length^A (default 1.0)",
          [&q](float v) { q.set_length_penalty(v); });
  f.AddWith<std::string>(
      "--early-stopping", cli::OneOf({"heuristic", "early", "never"}), "MODE",
      "heuristic|early|never", [&q](const std::string& m) {
        q.set_early_stopping(m == "early" ? v1::EARLY : m == "never" ? v1::NEVER : v1::HEURISTIC);
      });
  AddCount(f, "--num-return", "hypotheses to return",
           [&q](uint32_t n) { q.set_num_return_sequences(n); });
  f.Flag("--no-cache", "recompute every step instead of using the KV cache",
         [&q] { q.set_use_cache(false); });
  AddReal(f, "--temperature", "T", "sampling temperature", [&q](float v) { q.set_temperature(v); });
  AddCount(f, "--top-k", "keep the K most likely tokens", [&q](uint32_t n) { q.set_top_k(n); });
  AddReal(f, "--top-p", "P", "nucleus sampling mass", [&q](float v) { q.set_top_p(v); });
  AddReal(f, "--min-p", "P", "drop tokens below P times the best probability",
          [&q](float v) { q.set_min_p(v); });
  AddReal(f, "--repetition-penalty", "R", "penalty on tokens already in the context",
          [&q](float v) { q.set_repetition_penalty(v); });
  f.AddWith<uint64_t>("--seed", cli::Uint64(), "N", "sampling seed",
                      [&q](uint64_t n) { q.set_seed(n); });
}

}  // namespace

void AddGenerationFlags(cli::FlagSet& f, GenerationFlags* gen) {
  v1::GenerateRequest& q = gen->request;
  // The server checks the ranges (INVALID_ARGUMENT), so that they are written down once.
  f.SetGroup("Generation (each sets the GenerateRequest field of the same name)");
  f.AddWith<std::string>("--prompt", cli::Text(), "TEXT", "prompt text",
                         [&q](const std::string& v) { q.set_prompt(v); });
  f.AddWith<std::vector<int32_t>>("--prompt-ids", cli::IntList(), "LIST",
                                  "prompt as comma-separated token ids",
                                  [&q](const std::vector<int32_t>& ids) {
                                    q.clear_prompt_ids();
                                    for (int32_t id : ids) q.add_prompt_ids(id);
                                  });
  f.AddWith<std::string>("--session", cli::Text(), "ID", "continue this session (see chat)",
                         [&q](const std::string& v) { q.set_session_id(v); });
  AddDecodingFlags(f, q);
  f.AddWith<std::string>("--stop", cli::Text(), "TEXT", "stop sequence (repeatable)",
                         [&q](const std::string& v) { q.add_stop(v); });
  f.Flag("--ignore-eos", "keep generating after EOS", [&q] { q.set_ignore_eos(true); });
  AddCount(f, "--top-logprobs", "alternatives reported per token (see --json)",
           [&q](uint32_t n) { q.set_top_logprobs(n); });
  f.AddWith<std::string>("--context-overflow", cli::OneOf({"error", "slide"}), "M", "error|slide",
                         [&q](const std::string& m) {
                           q.set_context_overflow(m == "slide" ? v1::CONTEXT_OVERFLOW_SLIDE
                                                               : v1::CONTEXT_OVERFLOW_ERROR);
                         });
  AddCount(f, "--n-keep", "tokens the sliding window never drops",
           [&q](uint32_t n) { q.set_n_keep(n); });
  f.AddWith<std::string>("--add-bos", cli::OneOf({"true", "false"}), "true|false",
                         "add BOS (default: the model's choice on a session's first turn)",
                         [&q](const std::string& v) { q.set_add_bos(v == "true"); });
  f.SetGroup("");
}

void FinishGenerationFlags(GenerationFlags* flags, bool prompt_optional) {
  v1::GenerateRequest& q = flags->request;
  const bool has_text = !q.prompt().empty();
  const bool has_ids = q.prompt_ids_size() > 0;
  if (has_text && has_ids) UsageError("give only one of --prompt and --prompt-ids");
  if (!prompt_optional && !has_text && !has_ids) {
    UsageError("give --prompt or --prompt-ids (see --help)");
  }
}

}  // namespace textgen::client
