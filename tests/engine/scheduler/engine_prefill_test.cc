// The per-step token budget (EngineOptions::step_token_budget): long prompts are prefilled in
// chunks beside running streams, which keep receiving a token every step; results do not depend
// on the budget or on what shares the steps; no step exceeds the budget except by decode tokens;
// a step in which no stream decodes takes the larger idle budget; cancelling mid-prefill frees
// everything; sessions still reuse their cache.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_prefill_test {

using testing::CheckSame;
using testing::LongPrompt;

using testing::CollectingSink;

// Every StepReport of an engine, kept for the test to inspect.
class StepLog {
 public:
  void Add(const StepReport& r) {
    absl::MutexLock lock(&mu_);
    steps_.push_back(r);
  }
  std::vector<StepReport> steps() {
    absl::MutexLock lock(&mu_);
    return steps_;
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    steps_.clear();
  }

 private:
  absl::Mutex mu_;
  std::vector<StepReport> steps_;
};

// `idle` is the budget of a step without decode tokens (EngineOptions::idle_step_tokens); 0:
// the same as `budget`, so that every step's chunking follows `budget`.
std::unique_ptr<Engine> MakeEngine(const std::string& model, int budget,
                                   std::function<void(const StepReport&)> observer, int idle = 0) {
  EngineOptions o;
  o.model_path = testing::ModelPath(model);
  o.kv_blocks = 512;
  o.step_token_budget = budget;
  o.idle_step_tokens = idle == 0 ? budget : idle;
  o.step_observer = std::move(observer);
  // These tests count the prompt tokens each request runs and send the same prompts again:
  // the prefix cache would serve those (tests/engine/scheduler/engine_prefix_cache_test.cc).
  o.prefix_cache = false;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

// Every step: decode tokens may exceed the budget on their own, but prompt work only fills
// what the decode tokens left; a step without decode tokens may run up to `idle` (0: `budget`).
void CheckBudget(const std::vector<StepReport>& steps, int budget, int idle = 0) {
  for (const StepReport& r : steps) {
    INFO("step " << r.step << ": decode " << r.decode_tokens << ", prompt " << r.prompt_tokens);
    const int limit = r.decode_tokens == 0 ? std::max(budget, idle) : budget;
    CHECK((r.prompt_tokens == 0 || r.decode_tokens + r.prompt_tokens <= limit));
    int decode = 0, prompt = 0;
    for (const auto& q : r.requests) {
      decode += q.decode_tokens;
      prompt += q.prompt_tokens;
    }
    CHECK(decode == r.decode_tokens);
    CHECK(prompt == r.prompt_tokens);
  }
}

TEST_CASE("a step budget below one is refused naming it", "[engine][prefill]") {
  for (int bad : {0, -5}) {
    EngineOptions o;
    o.model_path = testing::ModelPath("stories260K.gguf");
    o.step_token_budget = bad;
    auto e = Engine::Create(o);
    REQUIRE(e.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(e.status().message()), Catch::Contains("step_token_budget"));
    o.step_token_budget = 8;
    o.idle_step_tokens = bad;
    e = Engine::Create(o);
    REQUIRE(e.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(e.status().message()), Catch::Contains("idle_step_tokens"));
  }
}

TEST_CASE("results do not depend on the budget, alone or batched", "[engine][prefill]") {
  for (const char* model : {"stories260K.gguf", "TinyStories-656K-F32.gguf"}) {
    // The requests: a 400-token prompt (greedy), seeded sampling and a 4-beam search on
    // medium prompts, and a short greedy one.
    auto reference_engine = MakeEngine(model, kUnlimitedTokens, nullptr);
    std::vector<EngineRequest> requests(4);
    requests[0].prompt_ids = LongPrompt(*reference_engine, 400, 0);
    requests[0].decoding.max_new_tokens = 60;
    requests[1].prompt_ids = LongPrompt(*reference_engine, 150, 1);
    requests[1].decoding.method = DecodingMethod::kSample;
    requests[1].decoding.sampling.temperature = 0.8f;
    requests[1].decoding.sampling.seed = 5;
    requests[1].decoding.max_new_tokens = 50;
    requests[2].prompt_ids = LongPrompt(*reference_engine, 120, 2);
    requests[2].decoding.method = DecodingMethod::kBeam;
    requests[2].decoding.beam.num_beams = 4;
    requests[2].decoding.max_new_tokens = 30;
    requests[3].prompt_ids = reference_engine->model().tokenizer().Encode("Once upon a time", true);
    requests[3].decoding.max_new_tokens = 80;
    for (EngineRequest& r : requests) r.decoding.ignore_eos = true;
    std::vector<GenerationResult> reference;
    for (const EngineRequest& r : requests) {
      auto sink = std::make_shared<CollectingSink>();
      REQUIRE(reference_engine->Submit(r, sink).ok());
      REQUIRE(sink->Wait().ok());
      reference.push_back(*sink->Wait());
    }
    reference_engine.reset();

    // {budget, idle budget}: the last one chunks prompts differently whenever no stream decodes.
    for (auto [budget, idle] : std::vector<std::pair<int, int>>{
             {7, 7}, {64, 64}, {kUnlimitedTokens, kUnlimitedTokens}, {7, 100}}) {
      INFO(model << ", budget " << budget << ", idle " << idle);
      StepLog log;
      auto engine = MakeEngine(
          model, budget, [&log](const StepReport& r) { log.Add(r); }, idle);
      // Alone, one after the other.
      for (size_t i = 0; i < requests.size(); ++i) {
        auto sink = std::make_shared<CollectingSink>();
        REQUIRE(engine->Submit(requests[i], sink).ok());
        REQUIRE(sink->Wait().ok());
        CheckSame(*sink->Wait(), reference[i]);
      }
      // Together: two copies of each in flight at once.
      std::vector<std::shared_ptr<CollectingSink>> sinks;
      absl::flat_hash_map<uint64_t, size_t> prompt_len;
      for (int copy = 0; copy < 2; ++copy) {
        for (const EngineRequest& r : requests) {
          sinks.push_back(std::make_shared<CollectingSink>());
          auto id = engine->Submit(r, sinks.back());
          REQUIRE(id.ok());
          prompt_len[*id] = r.prompt_ids.size();
        }
      }
      for (size_t i = 0; i < sinks.size(); ++i) {
        REQUIRE(sinks[i]->Wait().ok());
        CheckSame(*sinks[i]->Wait(), reference[i % requests.size()]);
        CHECK(sinks[i]->ids() == sinks[i]->Wait()->hypotheses[0].ids);
      }
      const std::vector<StepReport> steps = log.steps();
      CheckBudget(steps, budget, idle);
      // Each prompt ran exactly once, in as many chunks as the budget needs at least.
      absl::flat_hash_map<uint64_t, size_t> prompt_run, chunks;
      for (const StepReport& r : steps) {
        for (const auto& q : r.requests) {
          if (q.prompt_tokens == 0) continue;
          prompt_run[q.id] += q.prompt_tokens;
          ++chunks[q.id];
        }
      }
      for (const auto& [id, len] : prompt_len) {
        CHECK(prompt_run[id] == len);
        CHECK(chunks[id] >= (len + idle - 1) / idle);
      }
      EngineStats s = engine->Stats();
      CHECK(s.kv_blocks_free == s.kv_blocks_total);
    }
  }
}

TEST_CASE("a running stream gets a token every step while a long prompt is prefilled",
          "[engine][prefill]") {
  const int budget = 16;
  auto stream = std::make_shared<CollectingSink>();
  struct Seen {
    StepReport report;
    size_t stream_tokens = 0;  // the running stream's tokens after this step
  };
  absl::Mutex mu;
  std::vector<Seen> seen;
  // The idle budget is large: it must not apply while the stream decodes.
  const int idle = 512;
  auto engine = MakeEngine(
      "stories260K.gguf", budget,
      [&](const StepReport& r) {
        // OnDelta of this step has run already (same thread, before the observer).
        const size_t n = stream->ids().size();
        absl::MutexLock lock(&mu);
        seen.push_back({r, n});
      },
      idle);
  EngineRequest running;
  running.prompt_ids = engine->model().tokenizer().Encode("Once upon a time", true);
  running.decoding.max_new_tokens = 450;
  running.decoding.ignore_eos = true;
  auto running_id = engine->Submit(running, stream);
  REQUIRE(running_id.ok());
  while (stream->ids().size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  EngineRequest long_prompt;
  long_prompt.prompt_ids = LongPrompt(*engine, 400);
  long_prompt.decoding.max_new_tokens = 5;
  auto sink = std::make_shared<CollectingSink>();
  auto long_id = engine->Submit(long_prompt, sink);
  REQUIRE(long_id.ok());
  REQUIRE(sink->Wait().ok());
  CHECK(sink->Wait()->hypotheses[0].ids.size() == 5);
  engine->Cancel(*running_id);
  REQUIRE(stream->Wait().ok());
  REQUIRE(stream->Wait()->finish_reason == FinishReason::kCancelled);

  absl::MutexLock lock(&mu);
  int prefill_steps = 0, prefilled = 0;
  for (size_t i = 1; i < seen.size(); ++i) {
    const StepReport& r = seen[i].report;
    int long_tokens = 0, running_decode = 0;
    for (const auto& q : r.requests) {
      if (q.id == *long_id) long_tokens = q.prompt_tokens;
      if (q.id == *running_id) running_decode = q.decode_tokens;
    }
    if (long_tokens == 0) continue;
    INFO("step " << r.step);
    ++prefill_steps;
    prefilled += long_tokens;
    CHECK(long_tokens <= budget - 1);  // the stream's decode token came first
    CHECK(running_decode == 1);        // the stream ran in this step
    CHECK(seen[i].stream_tokens == seen[i - 1].stream_tokens + 1);  // and got its token
  }
  CHECK(prefilled == 400);
  CHECK(prefill_steps == (400 + budget - 2) / (budget - 1));
  std::vector<StepReport> steps;
  for (const Seen& s : seen) steps.push_back(s.report);
  CheckBudget(steps, budget, idle);
}

TEST_CASE("a prompt that stalls no stream runs in chunks of the idle budget", "[engine][prefill]") {
  const int budget = 16, idle = 128;
  StepLog log;
  auto engine = MakeEngine(
      "stories260K.gguf", budget, [&log](const StepReport& r) { log.Add(r); }, idle);
  EngineRequest r;
  r.prompt_ids = LongPrompt(*engine, 400);
  r.decoding.max_new_tokens = 4;
  r.decoding.ignore_eos = true;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(r, sink).ok());
  REQUIRE(sink->Wait().ok());
  std::vector<int> chunks;
  for (const StepReport& s : log.steps()) {
    if (s.prompt_tokens > 0) chunks.push_back(s.prompt_tokens);
    CHECK((s.prompt_tokens == 0 || s.decode_tokens == 0));  // alone: prompt steps decode nothing
  }
  CHECK(chunks == std::vector<int>{128, 128, 128, 16});
  CheckBudget(log.steps(), budget, idle);
}

TEST_CASE("cancelling a request in the middle of its chunked prefill frees its blocks",
          "[engine][prefill]") {
  std::atomic<Engine*> engine_ptr{nullptr};
  absl::Mutex mu;
  int prefilled = 0;        // the long request's prompt tokens run, as the reports tell
  int free_at_cancel = -1;  // free blocks when the cancel was asked
  auto engine = MakeEngine("stories260K.gguf", 8, [&](const StepReport& r) {
    Engine* e = engine_ptr.load();
    absl::MutexLock lock(&mu);
    for (const auto& q : r.requests) {
      if (q.prompt_tokens == 0) continue;
      prefilled += q.prompt_tokens;
      if (prefilled >= 80 && free_at_cancel < 0 && e != nullptr) {
        free_at_cancel = e->Stats().kv_blocks_free;
        e->Cancel(q.id);
      }
    }
  });
  engine_ptr.store(engine.get());
  for (DecodingMethod method : {DecodingMethod::kGreedy, DecodingMethod::kBeam}) {
    {
      absl::MutexLock lock(&mu);
      prefilled = 0;
      free_at_cancel = -1;
    }
    EngineRequest r;
    r.prompt_ids = LongPrompt(*engine, 400);
    r.decoding.method = method;
    r.decoding.beam.num_beams = 4;
    r.decoding.max_new_tokens = 20;
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    const auto& res = sink->Wait();
    REQUIRE(res.ok());
    CHECK(res->finish_reason == FinishReason::kCancelled);
    CHECK(res->hypotheses.at(0).ids.empty());
    CHECK(sink->ids().empty());
    EngineStats s = engine->Stats();
    CHECK(s.kv_blocks_free == s.kv_blocks_total);
    absl::MutexLock lock(&mu);
    CHECK(prefilled == 80);  // cancelled after 10 chunks of 8, none ran after
    CHECK(free_at_cancel == s.kv_blocks_total - 5);  // it held 80 tokens' blocks then
  }
}

TEST_CASE("sessions reuse their cache under a small budget", "[engine][prefill][session]") {
  const int budget = 3;
  StepLog log;
  auto engine = MakeEngine("stories260K.gguf", budget, [&log](const StepReport& r) { log.Add(r); });
  const Tokenizer& tok = engine->model().tokenizer();
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  auto turn = [&](std::vector<int32_t> ids, DecodingOptions d) {
    EngineRequest r;
    r.prompt_ids = std::move(ids);
    r.session_id = *session;
    r.decoding = d;
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    REQUIRE(sink->Wait().ok());
    return *sink->Wait();
  };
  DecodingOptions greedy;
  greedy.max_new_tokens = 30;
  greedy.ignore_eos = true;
  DecodingOptions beam = greedy;
  beam.method = DecodingMethod::kBeam;
  beam.beam.num_beams = 3;
  beam.max_new_tokens = 12;

  const std::vector<int32_t> first = LongPrompt(*engine, 100);
  GenerationResult t1 = turn(first, greedy);
  CHECK(t1.stats.cached_tokens == 0);
  const std::vector<int32_t> second = tok.Encode(" Then the dog ran home.", false);
  GenerationResult t2 = turn(second, greedy);
  const int len1 = t1.stats.prompt_tokens + t1.stats.generated_tokens;
  CHECK(t2.stats.cached_tokens == len1);
  CHECK(t2.stats.prompt_tokens == len1 + static_cast<int>(second.size()));
  // A beam turn: its whole answer is caught up in chunks, so the next turn reuses it.
  GenerationResult t3 = turn(tok.Encode(" The end.", false), beam);
  CHECK(t3.stats.cached_tokens == t2.stats.prompt_tokens + t2.stats.generated_tokens);
  GenerationResult t4 = turn(tok.Encode(" Once more.", false), greedy);
  CHECK(t4.stats.cached_tokens == t3.stats.prompt_tokens + t3.stats.generated_tokens);

  // The second turn's answer equals the conversation sent whole, without a session.
  std::vector<int32_t> whole = first;
  whole.insert(whole.end(), t1.hypotheses[0].ids.begin(), t1.hypotheses[0].ids.end());
  whole.insert(whole.end(), second.begin(), second.end());
  EngineRequest plain;
  plain.prompt_ids = whole;
  plain.decoding = greedy;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(plain, sink).ok());
  REQUIRE(sink->Wait().ok());
  CHECK(sink->Wait()->stats.cached_tokens == 0);
  CheckSame(*sink->Wait(), t2);
  CheckBudget(log.steps(), budget);
}

}  // namespace engine_prefill_test
}  // namespace textgen
