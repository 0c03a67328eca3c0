// textgen-client load: a closed-loop load generator. N worker threads each run blocking
// streaming calls back to back (simple, and each worker behaves like one real client), until a
// total number of requests or a duration is reached.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/textgen_client_args.h"
#include "client/textgen_client_commands.h"
#include "client/textgen_client_rpc.h"
#include "nlohmann/json.hpp"

namespace textgen::client {
namespace {

namespace v1 = ::textgen::v1;
using Clock = std::chrono::steady_clock;

constexpr char kLoadUsage[] = R"(textgen-client load: measure the server under concurrent streams.

Usage: textgen-client load (--prompt TEXT | --prompt-ids LIST | --prompt-tokens N) [--concurrency N]
                           (--duration S | --requests M) [--session-turns K] [options]

Each of N workers opens its own connection (all before the clock starts; --timeout bounds the
wait, default 10 s) and sends Generate calls back to back, until M calls in total have been made
or S seconds have passed (calls in flight then finish; with both, whichever comes first; with
neither, 10 seconds). Prints requests/s, generated tokens/s, the
time to first token (call start to the first message carrying tokens) and the inter-token
latency (the gap between two token-carrying messages, divided evenly among the later one's
tokens), as p50/p95/p99 in ms, and the failed calls by status code. Exits 1 if any call failed.)";

struct LoadOptions {
  int concurrency = 1;
  int prompt_tokens = 0;
  double duration_s = 0;
  int64_t requests = 0;
  int session_turns = 0;
  bool json = false;
};

// What one worker measured; merged after all workers have joined, so no locking while running.
struct Results {
  int64_t ok = 0;
  int64_t prompt_tokens = 0;  // as the server counted them (usage.prompt_tokens)
  int64_t generated_tokens = 0;
  std::vector<double> ttft_ms;
  std::vector<double> first_turn_ttft_ms;  // with --session-turns
  std::vector<double> last_turn_ttft_ms;   // with --session-turns
  std::vector<double> itl_ms;
  std::map<grpc::StatusCode, int64_t> errors;
  std::map<grpc::StatusCode, std::string> first_error;

  void AddError(const grpc::Status& s) {
    ++errors[s.error_code()];
    first_error.emplace(s.error_code(), s.error_message());
  }
  void Merge(const Results& o) {
    ok += o.ok;
    prompt_tokens += o.prompt_tokens;
    generated_tokens += o.generated_tokens;
    auto append = [](std::vector<double>& to, const std::vector<double>& from) {
      to.insert(to.end(), from.begin(), from.end());
    };
    append(ttft_ms, o.ttft_ms);
    append(first_turn_ttft_ms, o.first_turn_ttft_ms);
    append(last_turn_ttft_ms, o.last_turn_ttft_ms);
    append(itl_ms, o.itl_ms);
    for (const auto& [code, n] : o.errors) errors[code] += n;
    for (const auto& [code, msg] : o.first_error) first_error.emplace(code, msg);
  }
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Random prompts of a fixed length (--prompt-tokens): what the model's vocabulary allows.
struct RandomPromptSpec {
  int tokens = 0;  // 0: the request's own prompt
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
};

// One timed Generate call. Returns the time to first token (NaN when no token came) on success.
class Worker {
 public:
  Worker(const ConnectionOptions& conn, const v1::GenerateRequest& request,
         const RandomPromptSpec& random_prompt, uint64_t seed)
      : conn_(conn),
        request_(request),
        random_prompt_(random_prompt),
        rng_(seed),
        channel_(MakeChannel(conn, /*own_connection=*/true)),
        stub_(v1::TextGeneration::NewStub(channel_)) {}

  // Opens this worker's connection (gRPC retries a failed attempt with backoff until
  // `deadline`), so that no call fails on a transient connect error and no call's time to
  // first token includes connecting. Whether it connected.
  bool Connect(std::chrono::system_clock::time_point deadline) {
    return channel_->WaitForConnected(deadline);
  }

  // Runs one call (in the given session when not empty); records into results_. Returns
  // whether it succeeded and, through ttft_ms, its time to first token (NaN if no token came).
  bool Call(const std::string& session_id, double* ttft_ms) {
    v1::GenerateRequest request = request_;
    if (!session_id.empty()) request.set_session_id(session_id);
    if (random_prompt_.tokens > 0) FillRandomPrompt(&request);
    const Clock::time_point start = Clock::now();
    Clock::time_point previous;
    bool any = false;
    int64_t streamed = 0, reported = 0, prompt_tokens = 0;
    std::vector<double> itl;
    *ttft_ms = std::numeric_limits<double>::quiet_NaN();
    grpc::Status s = StreamGenerate(*stub_, conn_, request, [&](const v1::GenerateResponse& m) {
      if (m.has_usage()) {
        reported = m.usage().generated_tokens();
        prompt_tokens = m.usage().prompt_tokens();
      }
      const int n = m.tokens_size();
      if (n == 0) return;
      const Clock::time_point now = Clock::now();
      if (!any) {
        *ttft_ms = Ms(now - start);
        any = true;
      } else {
        // A message committing several tokens at once (stop-sequence holdback, beams) delivers
        // them together; spreading the gap keeps the per-token figure comparable.
        itl.insert(itl.end(), n, Ms(now - previous) / n);
      }
      previous = now;
      streamed += n;
    });
    if (!s.ok()) {
      results_.AddError(s);
      return false;
    }
    ++results_.ok;
    results_.prompt_tokens += prompt_tokens;
    results_.generated_tokens += std::max(streamed, reported);
    if (any) results_.ttft_ms.push_back(*ttft_ms);
    results_.itl_ms.insert(results_.itl_ms.end(), itl.begin(), itl.end());
    return true;
  }

  // CreateSession, `turns` calls, DeleteSession.
  void Conversation(int turns) {
    std::string session_id = NewSessionId();
    if (grpc::Status s = CreateSession(*stub_, conn_, &session_id); !s.ok()) {
      results_.AddError(s);
      return;
    }
    for (int turn = 1; turn <= turns; ++turn) {
      double ttft = 0;
      if (!Call(session_id, &ttft)) break;  // later turns would measure a broken conversation
      if (std::isnan(ttft)) continue;
      if (turn == 1) results_.first_turn_ttft_ms.push_back(ttft);
      if (turn == turns) results_.last_turn_ttft_ms.push_back(ttft);
    }
    if (grpc::Status s = DeleteSession(*stub_, conn_, session_id); !s.ok()) results_.AddError(s);
  }

  const Results& results() const { return results_; }

 private:
  // BOS, then ids uniform over the vocabulary except BOS and EOS (an EOS would only matter
  // without --ignore-eos, but a BOS mid-prompt is not text). Ids are sent as they are (the
  // server adds no BOS to prompt_ids, and refuses add_bos with them): the prompt is exactly
  // the requested length.
  void FillRandomPrompt(v1::GenerateRequest* request) {
    request->clear_prompt();
    request->clear_prompt_ids();
    request->clear_add_bos();
    std::uniform_int_distribution<int32_t> id(0, random_prompt_.vocab_size - 1);
    if (random_prompt_.bos_id >= 0) request->add_prompt_ids(random_prompt_.bos_id);
    while (request->prompt_ids_size() < random_prompt_.tokens) {
      const int32_t t = id(rng_);
      if (t != random_prompt_.bos_id && t != random_prompt_.eos_id) request->add_prompt_ids(t);
    }
  }

  ConnectionOptions conn_;
  v1::GenerateRequest request_;
  RandomPromptSpec random_prompt_;
  std::mt19937_64 rng_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
  Results results_;
};

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

struct Distribution {
  size_t n = 0;
  double p50 = 0, p95 = 0, p99 = 0;
};

Distribution Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.size(), Percentile(v, 50), Percentile(v, 95), Percentile(v, 99)};
}

std::string DistributionLine(const std::string& name, const Distribution& d) {
  if (d.n == 0) return absl::StrFormat("%-32s no samples\n", name + " (ms):");
  return absl::StrFormat("%-32s p50 %.3f  p95 %.3f  p99 %.3f  (%d samples)\n",
                         name + " (ms):", d.p50, d.p95, d.p99, d.n);
}

nlohmann::json DistributionJson(const Distribution& d) {
  if (d.n == 0) return {{"samples", 0}};
  return {{"samples", d.n}, {"p50", d.p50}, {"p95", d.p95}, {"p99", d.p99}};
}

void Report(const LoadOptions& o, const Results& r, double elapsed_s) {
  int64_t failed = 0;
  for (const auto& [code, n] : r.errors) failed += n;
  const Distribution ttft = Summarize(r.ttft_ms), itl = Summarize(r.itl_ms);
  const Distribution first_turn = Summarize(r.first_turn_ttft_ms);
  const Distribution last_turn = Summarize(r.last_turn_ttft_ms);
  const double rps = r.ok / elapsed_s, tps = r.generated_tokens / elapsed_s;
  if (o.json) {
    nlohmann::json j = {{"concurrency", o.concurrency},
                        {"elapsed_s", elapsed_s},
                        {"requests_ok", r.ok},
                        {"errors_total", failed},
                        {"requests_per_s", rps},
                        {"prompt_tokens", r.prompt_tokens},
                        {"generated_tokens", r.generated_tokens},
                        {"generated_tokens_per_s", tps},
                        {"time_to_first_token_ms", DistributionJson(ttft)},
                        {"inter_token_latency_ms", DistributionJson(itl)}};
    if (o.session_turns > 0) {
      j["session_turns"] = o.session_turns;
      j["first_turn_time_to_first_token_ms"] = DistributionJson(first_turn);
      j["last_turn_time_to_first_token_ms"] = DistributionJson(last_turn);
    }
    nlohmann::json errors = nlohmann::json::object();
    for (const auto& [code, n] : r.errors) {
      errors[StatusCodeName(code)] = {{"count", n}, {"first_message", r.first_error.at(code)}};
    }
    j["errors"] = errors;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::string out = absl::StrFormat("%d streams, %d requests ok, %d errors in %.3f s\n",
                                    o.concurrency, r.ok, failed, elapsed_s);
  out += absl::StrFormat("%-32s %.2f\n", "requests/s:", rps);
  if (r.ok > 0) {
    out += absl::StrFormat("%-32s %.1f\n",
                           "prompt tokens/request:", static_cast<double>(r.prompt_tokens) / r.ok);
  }
  out +=
      absl::StrFormat("%-32s %.1f (%d tokens)\n", "generated tokens/s:", tps, r.generated_tokens);
  out += DistributionLine("time to first token", ttft);
  out += DistributionLine("inter-token latency", itl);
  if (o.session_turns > 0) {
    out += DistributionLine("turn 1 time to first token", first_turn);
    out += DistributionLine(absl::StrFormat("turn %d time to first token", o.session_turns),
                            last_turn);
  }
  out += absl::StrFormat("errors: %d\n", failed);
  for (const auto& [code, n] : r.errors) {
    out +=
        absl::StrFormat("  %s: %d (first: %s)\n", StatusCodeName(code), n, r.first_error.at(code));
  }
  std::fputs(out.c_str(), stdout);
}

}  // namespace

int RunLoad(const std::vector<std::string>& args) {
  ConnectionOptions conn;
  GenerationFlags gen;
  LoadOptions o;
  cli::FlagSet f("textgen-client load", kLoadUsage, cli::Wording::kExpected);
  f.Add("--prompt-tokens", &o.prompt_tokens, cli::Int<int>(1, 1 << 20), "N",
        "each call's prompt is N token ids: BOS (when the model has one)\nthen ids drawn at "
        "random from the vocabulary (GetModelInfo), a new\ndraw per call from a generator "
        "seeded by the worker's index");
  f.Add("--concurrency", &o.concurrency, cli::Int<int>(1, 4096), "N",
        "parallel streams (default 1)");
  f.Add("--duration", &o.duration_s, cli::Number(0), "S", "stop starting calls after S seconds");
  f.Add("--requests", &o.requests, cli::Int<int64_t>(1), "M",
        "Generate calls in total (with --session-turns K: rounded up to whole\nconversations of "
        "K turns)");
  f.Add("--session-turns", &o.session_turns, cli::Int<int>(1, 1 << 20), "K",
        "each unit of work is a conversation: CreateSession, K turns of the\nprompt, "
        "DeleteSession; the K-th turn's time to first token (which\nreuses the cached KV of the "
        "earlier turns) is reported separately");
  f.Flag("--json", &o.json, "print the results as one JSON object");
  AddGenerationFlags(f, &gen);
  AddConnectionFlags(f, &conn);
  f.Parse(args);
  FinishGenerationFlags(&gen, /*prompt_optional=*/o.prompt_tokens > 0);
  if (o.prompt_tokens > 0 && (!gen.request.prompt().empty() || gen.request.prompt_ids_size() > 0)) {
    f.Fail("give only one of --prompt, --prompt-ids and --prompt-tokens");
  }
  RandomPromptSpec random_prompt;
  if (o.prompt_tokens > 0) {
    auto stub = v1::TextGeneration::NewStub(MakeChannel(conn));
    grpc::ClientContext context;
    PrepareContext(conn, "", &context);
    v1::ModelInfo info;
    if (grpc::Status s = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info); !s.ok()) {
      return ReportError(s);
    }
    if (info.vocab_size() < 3) {
      std::fprintf(stderr, "error: --prompt-tokens: the model's vocabulary has %u tokens\n",
                   info.vocab_size());
      return kExitRpcError;
    }
    random_prompt = {o.prompt_tokens, static_cast<int32_t>(info.vocab_size()), info.bos_id(),
                     info.eos_id()};
  }
  if (o.session_turns > 0 && !gen.request.session_id().empty()) {
    f.Fail("--session-turns creates its own sessions; drop --session");
  }
  if (o.duration_s <= 0 && o.requests == 0) o.duration_s = 10;

  // Units of work: single calls, or conversations of session_turns calls.
  const int64_t turns = std::max(o.session_turns, 1);
  const int64_t units =
      o.requests > 0 ? (o.requests + turns - 1) / turns : std::numeric_limits<int64_t>::max();
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < o.concurrency; ++i) {
    workers.push_back(std::make_unique<Worker>(conn, gen.request, random_prompt, i + 1));
  }
  // Every connection open before the clock starts (--timeout bounds it, else 10 s).
  const double connect_s = conn.timeout_s > 0 ? conn.timeout_s : 10;
  const auto connect_by = std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(connect_s));
  for (auto& w : workers) {
    if (!w->Connect(connect_by)) {
      std::fprintf(stderr, "error: UNAVAILABLE: cannot connect to %s within %g s\n",
                   conn.server.c_str(), connect_s);
      return kExitRpcError;
    }
  }

  std::atomic<int64_t> claimed{0};
  const Clock::time_point start = Clock::now();
  const Clock::time_point stop_at = o.duration_s > 0
                                        ? start + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(o.duration_s))
                                        : Clock::time_point::max();

  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&, w = w.get()] {
      while (Clock::now() < stop_at && claimed.fetch_add(1) < units) {
        if (o.session_turns > 0) {
          w->Conversation(o.session_turns);
        } else {
          double ttft = 0;
          w->Call(gen.request.session_id(), &ttft);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();

  Results total;
  for (const auto& w : workers) total.Merge(w->results());
  Report(o, total, elapsed_s);
  return total.errors.empty() ? 0 : kExitRpcError;
}

}  // namespace textgen::client
