#include "client/textgen_client_args.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace textgen::client {

namespace v1 = ::textgen::v1;

void UsageError(const std::string& message) {
  std::fprintf(stderr, "textgen-client: %s\n", message.c_str());
  std::exit(kExitUsage);
}

FlagReader::FlagReader(std::vector<std::string> args, std::string usage)
    : args_(std::move(args)), usage_(std::move(usage)) {}

bool FlagReader::Next() {
  if (has_inline_value_) Bad("takes no value");
  if (next_ >= args_.size()) return false;
  flag_ = args_[next_++];
  has_inline_value_ = false;
  if (flag_ == "--help" || flag_ == "-h") {
    std::fputs(usage_.c_str(), stdout);
    std::exit(0);
  }
  if (flag_.rfind("--", 0) != 0) {
    UsageError("unexpected argument '" + flag_ + "' (see --help)");
  }
  if (size_t eq = flag_.find('='); eq != std::string::npos) {
    inline_value_ = flag_.substr(eq + 1);
    flag_.resize(eq);
    has_inline_value_ = true;
  }
  return true;
}

std::string FlagReader::Value() {
  if (has_inline_value_) {
    has_inline_value_ = false;
    return inline_value_;
  }
  if (next_ >= args_.size()) Bad("missing value");
  return args_[next_++];
}

int64_t FlagReader::Int(int64_t min, int64_t max) {
  std::string v = Value();
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < min || n > max) {
    Bad("expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" +
        v + "'");
  }
  return n;
}

uint64_t FlagReader::Uint64() {
  std::string v = Value();
  uint64_t n = 0;
  // SimpleAtoi accepts a leading '-' for unsigned types on some versions; reject it explicitly.
  if (v.empty() || v[0] == '-' || !absl::SimpleAtoi(v, &n)) {
    Bad("expected an unsigned integer, got '" + v + "'");
  }
  return n;
}

float FlagReader::Float() {
  std::string v = Value();
  float f = 0;
  if (!absl::SimpleAtof(v, &f) || !std::isfinite(f)) Bad("expected a number, got '" + v + "'");
  return f;
}

double FlagReader::Double(double min) {
  std::string v = Value();
  double d = 0;
  if (!absl::SimpleAtod(v, &d) || !std::isfinite(d) || d < min) {
    Bad("expected a number >= " + std::to_string(min) + ", got '" + v + "'");
  }
  return d;
}

bool FlagReader::Bool() { return Choice({"true", "false"}) == "true"; }

std::string FlagReader::Choice(const std::vector<std::string>& choices) {
  std::string v = Value();
  for (const std::string& c : choices) {
    if (v == c) return v;
  }
  Bad("expected one of " + absl::StrJoin(choices, "|") + ", got '" + v + "'");
}

void FlagReader::Unknown() const { UsageError("unknown flag '" + flag_ + "' (see --help)"); }

void FlagReader::Bad(const std::string& what) const { UsageError(flag_ + ": " + what); }

const char kConnectionFlagsHelp[] = R"(Connection:
  --server HOST:PORT      server address (default 127.0.0.1:50051)
  --timeout SECONDS       deadline of each call (default: none)
  --api-key KEY           send "authorization: Bearer KEY" (default: $TEXTGEN_API_KEY;
                          prefer the variable: the command line shows in ps)
  --tls-ca FILE           use TLS, verifying the server with these PEM CA certificates
                          (default: plain text; also $TEXTGEN_TLS_CA)
  --tls                   use TLS, verifying the server with the system's CA certificates
  --tls-server-name NAME  the name the server's certificate must carry, if not the --server
                          host (also $TEXTGEN_TLS_SERVER_NAME)
  --tls-cert FILE         mutual TLS: this client's PEM certificate (with --tls-key)
  --tls-key FILE          mutual TLS: its PEM private key
  --help                  this text
)";

std::string ConnectionOptions::Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool ParseConnectionFlag(FlagReader& r, ConnectionOptions* options) {
  if (r.flag() == "--server") {
    options->server = r.Value();
    if (options->server.empty()) r.Bad("empty address");
  } else if (r.flag() == "--timeout") {
    options->timeout_s = r.Double(0);
  } else if (r.flag() == "--api-key") {
    options->api_key = r.Value();
  } else if (r.flag() == "--tls-ca") {
    options->tls_ca = r.Value();
  } else if (r.flag() == "--tls-server-name") {
    options->tls_server_name = r.Value();
  } else if (r.flag() == "--tls") {
    options->tls_system_roots = true;
  } else if (r.flag() == "--tls-cert") {
    options->tls_cert = r.Value();
  } else if (r.flag() == "--tls-key") {
    options->tls_key = r.Value();
  } else {
    return false;
  }
  return true;
}

const char kGenerationFlagsHelp[] =
    R"(Generation (each sets the GenerateRequest field of the same name; the server
validates ranges and answers INVALID_ARGUMENT):
  --prompt TEXT           prompt text
  --prompt-ids LIST       prompt as comma-separated token ids
  --session ID            continue this session (see chat)
  --method M              greedy|sample|beam (default: unset, the server infers it: beam
                          with --beams > 1, sample with a sampling flag, else greedy)
  --max-new-tokens N      tokens to generate at most (0 = server default)
  --beams B               beam search width
  --length-penalty A      beam score = cum_logprob / length^A (default 1.0)
  --early-stopping MODE   heuristic|early|never
  --num-return N          hypotheses to return
  --no-cache              recompute every step instead of using the KV cache
  --temperature T         sampling temperature
  --top-k K, --top-p P, --min-p P, --repetition-penalty R
  --seed N                sampling seed
  --stop TEXT             stop sequence (repeatable)
  --ignore-eos            keep generating after EOS
  --top-logprobs N        alternatives reported per token (see --json)
  --context-overflow M    error|slide
  --n-keep N              tokens the sliding window never drops
  --add-bos true|false    add BOS (default: the model's choice on a session's first turn)
)";

bool ParseGenerationFlag(FlagReader& r, GenerationFlags* flags) {
  v1::GenerateRequest& q = flags->request;
  const std::string& f = r.flag();
  constexpr int64_t kU32 = std::numeric_limits<uint32_t>::max();
  if (f == "--prompt") {
    q.set_prompt(r.Value());
  } else if (f == "--prompt-ids") {
    std::string v = r.Value();
    q.clear_prompt_ids();
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(part, &id)) r.Bad("'" + std::string(part) + "' is not an integer");
      q.add_prompt_ids(id);
    }
    if (q.prompt_ids_size() == 0) r.Bad("no token ids in '" + v + "'");
  } else if (f == "--session") {
    q.set_session_id(r.Value());
  } else if (f == "--method") {
    std::string m = r.Choice({"greedy", "sample", "beam"});
    q.set_method(m == "beam" ? v1::BEAM : m == "sample" ? v1::SAMPLE : v1::GREEDY);
  } else if (f == "--max-new-tokens") {
    q.set_max_new_tokens(r.Int(0, kU32));
  } else if (f == "--beams") {
    q.set_num_beams(r.Int(0, kU32));
  } else if (f == "--length-penalty") {
    q.set_length_penalty(r.Float());
  } else if (f == "--early-stopping") {
    std::string m = r.Choice({"heuristic", "early", "never"});
    q.set_early_stopping(m == "early" ? v1::EARLY : m == "never" ? v1::NEVER : v1::HEURISTIC);
  } else if (f == "--num-return") {
    q.set_num_return_sequences(r.Int(0, kU32));
  } else if (f == "--no-cache") {
    q.set_use_cache(false);
  } else if (f == "--temperature") {
    q.set_temperature(r.Float());
  } else if (f == "--top-k") {
    q.set_top_k(r.Int(0, kU32));
  } else if (f == "--top-p") {
    q.set_top_p(r.Float());
  } else if (f == "--min-p") {
    q.set_min_p(r.Float());
  } else if (f == "--repetition-penalty") {
    q.set_repetition_penalty(r.Float());
  } else if (f == "--seed") {
    q.set_seed(r.Uint64());
  } else if (f == "--stop") {
    q.add_stop(r.Value());
  } else if (f == "--ignore-eos") {
    q.set_ignore_eos(true);
  } else if (f == "--top-logprobs") {
    q.set_top_logprobs(r.Int(0, kU32));
  } else if (f == "--context-overflow") {
    q.set_context_overflow(r.Choice({"error", "slide"}) == "slide" ? v1::CONTEXT_OVERFLOW_SLIDE
                                                                   : v1::CONTEXT_OVERFLOW_ERROR);
  } else if (f == "--n-keep") {
    q.set_n_keep(r.Int(0, kU32));
  } else if (f == "--add-bos") {
    q.set_add_bos(r.Bool());
  } else {
    return false;
  }
  return true;
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
