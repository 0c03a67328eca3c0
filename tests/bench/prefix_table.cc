#include "tests/bench/prefix_table.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/scheduler/engine.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Times one request from its submission to its first streamed token.
class TimedSink : public GenerationSink {
 public:
  TimedSink() : submitted_(Clock::now()) {}
  void OnDelta(const StreamDelta& d) override {
    absl::MutexLock lock(&mu_);
    if (!first_.has_value() && !d.tokens.empty()) first_ = Clock::now();
  }
  void OnDone(absl::StatusOr<GenerationResult> r) override {
    if (!r.ok()) Die("a benchmark request failed: " + r.status().ToString());
    {
      absl::MutexLock lock(&mu_);
      result_ = *std::move(r);
    }
    done_.Notify();
  }
  // Seconds to the first token, once done.
  double Ttft() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    if (!first_.has_value()) Die("a benchmark request streamed no token");
    return std::chrono::duration<double>(*first_ - submitted_).count();
  }
  const GenerationResult& Result() {
    done_.WaitForNotification();
    return result_;
  }

 private:
  const Clock::time_point submitted_;
  absl::Mutex mu_;
  std::optional<Clock::time_point> first_;
  GenerationResult result_;
  absl::Notification done_;
};

struct Bench {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<std::atomic<int64_t>> prompt_tokens;  // computed by the engine so far
};

Bench MakeBench(const BenchOptions& o, bool prefix_cache) {
  Bench b;
  b.prompt_tokens = std::make_shared<std::atomic<int64_t>>(0);
  EngineOptions e;
  e.model_path = o.prefix_model;
  e.model.llama.linear.compute = o.compute;
  e.model.threads = o.threads;
  e.prefix_cache = prefix_cache;
  e.kv_prefault = o.kv_prefault;
  e.step_observer = [counter = b.prompt_tokens](const StepReport& r) {
    *counter += r.prompt_tokens;
  };
  auto engine = Engine::Create(e);
  if (!engine.ok()) Die(o.prefix_model + ": " + engine.status().ToString());
  b.engine = std::move(engine).value();
  return b;
}

std::shared_ptr<TimedSink> Submit(Engine& e, std::vector<int32_t> prompt, int new_tokens,
                                  const std::string& session = "") {
  EngineRequest r;
  r.prompt_ids = std::move(prompt);
  r.session_id = session;
  r.decoding.max_new_tokens = new_tokens;
  r.decoding.ignore_eos = true;
  auto sink = std::make_shared<TimedSink>();
  if (absl::Status s = e.Submit(std::move(r), sink).status(); !s.ok()) Die(s.ToString());
  return sink;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct SharedPrompt {
  int64_t computed = 0;  // prompt tokens the engine ran
  double first_ttft = 0;
  double rest_ttft = 0;  // median of requests 2-16
};

SharedPrompt RunSharedPrompt(const BenchOptions& o, Bench& b, int vocab, uint64_t seed) {
  const std::vector<int32_t> system = RandomPrompt(o.prefix_system_tokens, vocab, seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(Concat(system, RandomPrompt(o.prefix_question_tokens, vocab, seed + 1 + i)));
  }
  SharedPrompt out;
  const int64_t before = *b.prompt_tokens;
  out.first_ttft = Submit(*b.engine, prompts[0], 16)->Ttft();
  std::vector<std::shared_ptr<TimedSink>> sinks;
  for (int i = 1; i < 16; ++i) sinks.push_back(Submit(*b.engine, prompts[i], 16));
  std::vector<double> ttft;
  for (auto& s : sinks) ttft.push_back(s->Ttft());
  out.rest_ttft = Median(ttft);
  out.computed = *b.prompt_tokens - before;
  return out;
}

struct ChatTurn5 {
  double ttft = 0;
  int computed = 0;  // prompt tokens turn 5 ran (not served from cached K/V)
};

// Turn 5 of a 5-turn conversation: resent whole each turn (the ids the engine generated, as
// they are), or in a session.
ChatTurn5 RunChat(Bench& b, int vocab, uint64_t seed, bool session) {
  std::string id;
  if (session) {
    auto created = b.engine->CreateSession();
    if (!created.ok()) Die(created.status().ToString());
    id = *created;
  }
  std::vector<int32_t> conversation;
  ChatTurn5 out;
  for (int turn = 0; turn < 5; ++turn) {
    const std::vector<int32_t> user = RandomPrompt(turn == 0 ? 200 : 30, vocab, seed + turn);
    conversation = Concat(std::move(conversation), user);
    auto sink = Submit(*b.engine, session ? user : conversation, 32, id);
    out.ttft = sink->Ttft();
    const GenerationStats& st = sink->Result().stats;
    out.computed = st.prompt_tokens - st.cached_tokens;
    conversation = Concat(std::move(conversation), sink->Result().hypotheses.at(0).ids);
  }
  if (session) (void)b.engine->DeleteSession(id);
  return out;
}

// CPU seconds this process has used (all threads, user + system).
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Generated tokens/s of 16 streams with random 128-token prompts, 64 new tokens each; with
// `cpu_ms_per_token`, also the process's CPU milliseconds per generated token (steadier than
// wall time on a shared host, whose neighbours steal time).
double RunNoMatch(Bench& b, int vocab, uint64_t seed, double* cpu_ms_per_token = nullptr) {
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  std::vector<std::shared_ptr<TimedSink>> sinks;
  for (int i = 0; i < 16; ++i)
    sinks.push_back(Submit(*b.engine, RandomPrompt(128, vocab, seed + i), 64));
  int64_t tokens = 0;
  for (auto& s : sinks) tokens += s->Result().stats.generated_tokens;
  if (cpu_ms_per_token != nullptr) {
    *cpu_ms_per_token = 1e3 * (ProcessCpuSeconds() - cpu_start) / static_cast<double>(tokens);
  }
  return tokens / std::chrono::duration<double>(Clock::now() - start).count();
}

// The no-match scenario alone, o.repeats pairs, the order of on and off alternating so that
// neither always runs first (a cost of the cache shows as on / off below 1 in both orders).
void PrintNoMatchOnly(const BenchOptions& o, Bench& on, Bench& off, int vocab,
                      const std::string& name) {
  std::vector<double> ratio, cpu_ratio;
  std::string runs;
  uint64_t seed = o.seed * 1000;
  for (int r = 0; r < o.repeats; ++r) {
    double tput[2], cpu[2];  // [on, off]
    for (int i = 0; i < 2; ++i) {
      const int k = (r + i) % 2;
      tput[k] = RunNoMatch(k == 0 ? on : off, vocab, seed += 100, &cpu[k]);
    }
    ratio.push_back(tput[0] / tput[1]);
    cpu_ratio.push_back(cpu[1] / cpu[0]);
    absl::StrAppendFormat(&runs, "%s%.1f/%.1f (%.1f/%.1f)%s", r ? ", " : "", tput[0], tput[1],
                          cpu[0], cpu[1], r % 2 ? " off first" : "");
  }
  absl::PrintF(
      "| %s: no match, 16 streams, random 128-token prompts, 64 new tokens: generated "
      "tok/s on/off by run (CPU ms per token on/off): %s | on / off, median of %d "
      "paired runs: %.3f by tok/s, %.3f by CPU time per token |\n",
      name, runs, o.repeats, Median(ratio), Median(cpu_ratio));
  std::fflush(stdout);
}

}  // namespace

void PrintPrefixTable(const BenchOptions& o) {
  Bench on = MakeBench(o, true);
  Bench off = MakeBench(o, false);
  const int vocab = on.engine->model().config().n_vocab;
  const std::string name = DisplayName(on.engine->model());
  // Untimed: the first long prefill pays one-time costs (kernel generation, page faults).
  for (Bench* b : {&on, &off}) Submit(*b->engine, RandomPrompt(600, vocab, 999), 2)->Result();
  if (o.prefix_nomatch_only) return PrintNoMatchOnly(o, on, off, vocab, name);

  uint64_t seed = o.seed * 1000;
  std::vector<SharedPrompt> shared[2];  // [on, off]
  std::vector<ChatTurn5> stateless[2], in_session;
  std::vector<double> tput[2];
  for (int r = 0; r < o.repeats; ++r) {
    // On and off alternate within each repeat, so that machine noise hits both alike.
    for (int k = 0; k < 2; ++k) {
      Bench& b = k == 0 ? on : off;
      shared[k].push_back(RunSharedPrompt(o, b, vocab, seed += 100));
    }
    const uint64_t chat_seed = seed += 100;
    // Another conversation for the session: the stateless one must not find its blocks.
    in_session.push_back(RunChat(on, vocab, chat_seed + 50, true));
    for (int k = 0; k < 2; ++k)
      stateless[k].push_back(RunChat(k == 0 ? on : off, vocab, chat_seed, false));
    for (int k = 0; k < 2; ++k) tput[k].push_back(RunNoMatch(k == 0 ? on : off, vocab, seed + 1));
    seed += 100;
  }
  auto median_of = [](const std::vector<SharedPrompt>& v, auto field) {
    std::vector<double> x;
    for (const SharedPrompt& s : v) x.push_back(static_cast<double>(s.*field));
    return Median(x);
  };
  const double rest_on = median_of(shared[0], &SharedPrompt::rest_ttft);
  const double rest_off = median_of(shared[1], &SharedPrompt::rest_ttft);
  absl::PrintF("| %s, medians of %d runs | prefix cache on | off | off / on |\n|---|---|---|---|\n",
               name, o.repeats);
  const int sys = o.prefix_system_tokens, q = o.prefix_question_tokens;
  absl::PrintF(
      "| shared %d-token system prompt, 16 x %d-token questions: prompt tokens "
      "computed (bound %d + 16 x %d + 16 x 16 = %d) | %.0f | %.0f | %.1fx |\n",
      sys, q, sys, q, sys + 16 * q + 16 * 16, median_of(shared[0], &SharedPrompt::computed),
      median_of(shared[1], &SharedPrompt::computed),
      median_of(shared[1], &SharedPrompt::computed) /
          median_of(shared[0], &SharedPrompt::computed));
  absl::PrintF("| ... request 1 TTFT ms | %.0f | %.0f | %.2fx |\n",
               1e3 * median_of(shared[0], &SharedPrompt::first_ttft),
               1e3 * median_of(shared[1], &SharedPrompt::first_ttft),
               median_of(shared[1], &SharedPrompt::first_ttft) /
                   median_of(shared[0], &SharedPrompt::first_ttft));
  absl::PrintF("| ... median TTFT ms of requests 2-16 (sent together) | %.0f | %.0f | %.1fx |\n",
               1e3 * rest_on, 1e3 * rest_off, rest_off / rest_on);
  auto chat = [](const std::vector<ChatTurn5>& v, auto field) {
    std::vector<double> x;
    for (const ChatTurn5& c : v) x.push_back(static_cast<double>(c.*field));
    return Median(x);
  };
  // Paired ratios: each repeat's stateless turn ran right after the same conversation's
  // session turn.
  std::vector<double> chat_ratio, tput_ratio;
  for (int r = 0; r < o.repeats; ++r) {
    chat_ratio.push_back(stateless[0][r].ttft / in_session[r].ttft);
    tput_ratio.push_back(tput[0][r] / tput[1][r]);
  }
  absl::PrintF(
      "| stateless 5-turn chat: turn 5 TTFT ms (in a session: %.1f ms, %.0f prompt tokens "
      "computed; stateless / session, median of paired runs: %.2fx with the cache on; prompt "
      "tokens computed on / off: %.0f / %.0f) | %.1f | %.1f | %.1fx |\n",
      1e3 * chat(in_session, &ChatTurn5::ttft), chat(in_session, &ChatTurn5::computed),
      Median(chat_ratio), chat(stateless[0], &ChatTurn5::computed),
      chat(stateless[1], &ChatTurn5::computed), 1e3 * chat(stateless[0], &ChatTurn5::ttft),
      1e3 * chat(stateless[1], &ChatTurn5::ttft),
      chat(stateless[1], &ChatTurn5::ttft) / chat(stateless[0], &ChatTurn5::ttft));
  std::string runs;
  for (int r = 0; r < o.repeats; ++r) {
    absl::StrAppendFormat(&runs, "%s%.1f/%.1f", r ? ", " : "", tput[0][r], tput[1][r]);
  }
  absl::PrintF(
      "| no match: 16 streams, random 128-token prompts, 64 new tokens: generated tok/s, "
      "median of %d (on/off by run: %s) | %.1f | %.1f | on / off, median of paired runs %.3f "
      "|\n",
      o.repeats, runs, Median(tput[0]), Median(tput[1]), Median(tput_ratio));
  std::fflush(stdout);
}

}  // namespace textgen::bench
