// A request's life in the engine: refused at once when it can never fit the KV pool, not held
// back by a queued request that must wait (within a bound), a cancel that frees its queue place
// and its session at once, and a session that outgrows the context saying so.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_lifecycle_test {

using testing::CollectingSink;

// Parks the scheduler thread in the step observer while frozen, so that a test can act between
// two steps and see what Submit, Cancel and Stats do before the scheduler runs again.
class Freezer {
 public:
  std::function<void(const StepReport&)> Observer() {
    return [this](const StepReport&) {
      absl::MutexLock lock(&mu_);
      parked_ = frozen_;
      mu_.Await(absl::Condition(
          +[](bool* frozen) { return !*frozen; }, &frozen_));
      parked_ = false;
    };
  }
  // Returns once the scheduler is parked (a request must be running for it to get there).
  void Freeze() {
    absl::MutexLock lock(&mu_);
    frozen_ = true;
    mu_.Await(absl::Condition(&parked_));
  }
  void Thaw() {
    absl::MutexLock lock(&mu_);
    frozen_ = false;
  }

 private:
  absl::Mutex mu_;
  bool frozen_ = false;
  bool parked_ = false;
};

std::unique_ptr<Engine> MakeEngine(EngineOptions o) {
  o.model_path = testing::ModelPath("stories260K.gguf");
  // F32 arithmetic: a recomputed prefix gives the same logits as a cached one.
  o.model.llama.linear.compute = ops::LinearCompute::kF32;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

EngineRequest Request(const Engine& e, const std::string& prompt, int max_new,
                      const std::string& session = "") {
  EngineRequest r;
  r.prompt_ids = e.model().tokenizer().Encode(prompt, true);
  r.decoding.max_new_tokens = max_new;
  r.decoding.ignore_eos = true;  // answers of a known length
  r.session_id = session;
  return r;
}

void WaitForDeltas(CollectingSink& sink, int n) {
  while (sink.deltas() < n && sink.done_calls() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_CASE("a request that can never fit the KV pool is refused at once saying what fits",
          "[engine][lifecycle]") {
  EngineOptions o;
  o.kv_blocks = 16;  // 256 tokens
  auto engine = MakeEngine(o);
  auto sink = std::make_shared<CollectingSink>();
  // 5 prompt tokens in 1 block, then 1 + ceil(m / 16) blocks: m = 224 is the most that fits.
  EngineRequest big = Request(*engine, "Once upon a time", 400);
  REQUIRE(big.prompt_ids.size() == 5);
  auto refused = engine->Submit(big, sink);
  REQUIRE(refused.status().code() == absl::StatusCode::kResourceExhausted);
  const std::string message(refused.status().message());
  CHECK_THAT(message, Catch::Contains("can never fit the KV cache"));
  CHECK_THAT(message, Catch::Contains("the pool holds 16"));
  CHECK_THAT(message, Catch::Contains("at most max_new_tokens 224 fits"));

  // What the message offers runs to its end.
  EngineRequest fits = Request(*engine, "Once upon a time", 224);
  auto fits_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(fits, fits_sink).ok());
  const auto& res = fits_sink->Wait();
  REQUIRE(res.ok());
  CHECK(res->hypotheses[0].ids.size() == 224);

  // A length left to the server (stop_at_context_limit) is cut to what the pool can hold.
  EngineRequest defaulted = Request(*engine, "Once upon a time", 400);
  defaulted.decoding.stop_at_context_limit = true;
  auto defaulted_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(defaulted, defaulted_sink).ok());
  const auto& cut = defaulted_sink->Wait();
  REQUIRE(cut.ok());
  CHECK(cut->hypotheses[0].ids.size() == 224);

  // A prompt that alone cannot fit says so.
  EngineRequest huge = Request(*engine, "Once", 10);
  huge.prompt_ids.assign(300, 5);
  auto h = engine->Submit(huge, sink);
  CHECK(h.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(h.status().message()), Catch::Contains("even this prompt does not fit"));
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

TEST_CASE("a queued request that must wait lets later ones that fit start, a bounded number",
          "[engine][lifecycle]") {
  EngineOptions o;
  o.kv_blocks = 40;
  o.max_overtakes = 2;
  auto engine = MakeEngine(o);
  // long_run may hold 1 + 19 + 1 = 21 blocks, waiting 1 + 29 + 1 = 31: it cannot start beside
  // long_run; a small one (3 blocks) can.
  auto long_run = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Request(*engine, "Once upon a time", 300), long_run).ok());
  WaitForDeltas(*long_run, 1);
  auto waiting = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Request(*engine, "Once upon a time", 450), waiting).ok());
  std::vector<std::shared_ptr<CollectingSink>> small;
  for (int i = 0; i < 4; ++i) {
    small.push_back(std::make_shared<CollectingSink>());
    REQUIRE(engine->Submit(Request(*engine, "The cat", 8), small.back()).ok());
  }
  // The first two overtake the waiting request and end long before long_run does.
  for (int i = 0; i < 2; ++i) {
    REQUIRE(small[i]->Wait().ok());
    CHECK(long_run->done_calls() == 0);
  }
  // Then the queue waits for it: it starts once long_run has ended, the others beside it.
  for (int i = 2; i < 4; ++i) {
    REQUIRE(small[i]->Wait().ok());
    CHECK(long_run->done_calls() == 1);
  }
  REQUIRE(long_run->Wait().ok());
  const auto& w = waiting->Wait();
  REQUIRE(w.ok());
  CHECK(w->hypotheses[0].ids.size() == 450);
}

TEST_CASE("cancelling a queued request frees its queue place and its session at once",
          "[engine][lifecycle]") {
  Freezer freezer;
  EngineOptions o;
  o.max_active_requests = 1;
  o.max_queued_requests = 1;
  o.step_observer = freezer.Observer();
  auto engine = MakeEngine(o);
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  auto running = std::make_shared<CollectingSink>();
  auto running_id = engine->Submit(Request(*engine, "Once upon a time", 1500), running);
  REQUIRE(running_id.ok());
  WaitForDeltas(*running, 1);
  auto queued = std::make_shared<CollectingSink>();
  auto queued_id = engine->Submit(Request(*engine, "Once", 8, *session), queued);
  REQUIRE(queued_id.ok());

  // The scheduler is parked between two steps: whatever changes now is Cancel's doing.
  freezer.Freeze();
  CHECK(engine->Stats().queued == 1);
  engine->Cancel(*queued_id);
  CHECK(engine->Stats().queued == 0);
  auto next = std::make_shared<CollectingSink>();
  auto next_id = engine->Submit(Request(*engine, "Once", 8, *session), next);
  INFO(next_id.status().ToString());
  CHECK(next_id.ok());  // neither "queue full" nor the session still taken
  freezer.Thaw();

  CHECK(absl::IsCancelled(queued->Wait().status()));
  engine->Cancel(*running_id);
  CHECK(running->Wait().ok());
  if (next_id.ok()) {
    const auto& res = next->Wait();
    REQUIRE(res.ok());
    CHECK(res->hypotheses[0].ids.size() == 8);
  }
  CHECK(queued->done_calls() == 1);
}

TEST_CASE(
    "a session takes its next turn right after a cancel, and the cancelled turn changes "
    "nothing",
    "[engine][lifecycle][session]") {
  Freezer freezer;
  EngineOptions o;
  o.step_observer = freezer.Observer();
  auto engine = MakeEngine(o);
  const Tokenizer& tok = engine->model().tokenizer();
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  auto first = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Request(*engine, "Once upon a time", 12, *session), first).ok());
  REQUIRE(first->Wait().ok());
  // The turn to cancel, well under way.
  EngineRequest turn = Request(*engine, "Once upon a time", 12, *session);
  turn.prompt_ids = tok.Encode(" Then", false);
  turn.decoding.max_new_tokens = 400;
  auto cancelled = std::make_shared<CollectingSink>();
  auto cancelled_id = engine->Submit(turn, cancelled);
  REQUIRE(cancelled_id.ok());
  WaitForDeltas(*cancelled, 3);

  freezer.Freeze();
  engine->Cancel(*cancelled_id);
  EngineRequest next = Request(*engine, "Once upon a time", 12, *session);
  next.prompt_ids = tok.Encode(" Later", false);
  auto next_sink = std::make_shared<CollectingSink>();
  auto next_id = engine->Submit(next, next_sink);
  INFO(next_id.status().ToString());
  CHECK(next_id.ok());  // not FAILED_PRECONDITION while the cancelled turn winds down
  freezer.Thaw();

  const auto& c = cancelled->Wait();
  REQUIRE(c.ok());
  CHECK(c->finish_reason == FinishReason::kCancelled);
  if (!next_id.ok()) return;
  const auto& res = next_sink->Wait();
  REQUIRE(res.ok());
  // Built on turn 1 alone, as the same conversation sent whole without a session.
  std::vector<int32_t> whole = tok.Encode("Once upon a time", true);
  const auto& t1 = first->Wait()->hypotheses[0].ids;
  whole.insert(whole.end(), t1.begin(), t1.end());
  const std::vector<int32_t> later = tok.Encode(" Later", false);
  whole.insert(whole.end(), later.begin(), later.end());
  EngineRequest alone = Request(*engine, "Once", 12);
  alone.prompt_ids = whole;
  auto alone_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(alone, alone_sink).ok());
  REQUIRE(alone_sink->Wait().ok());
  CHECK(res->hypotheses[0].ids == alone_sink->Wait()->hypotheses[0].ids);
  CHECK(res->stats.cached_tokens > 0);
  auto attachment = engine->GetSessionAttachment(*session);
  REQUIRE(attachment.ok());
  CHECK(attachment->version == 2);  // turn 1 and the last one; the cancelled one left no trace
}

TEST_CASE("a session that outgrows the context says it is full and what to do",
          "[engine][lifecycle][session]") {
  EngineOptions o;
  o.model.llama.n_ctx = 128;
  auto engine = MakeEngine(o);
  const Tokenizer& tok = engine->model().tokenizer();
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  auto first = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Request(*engine, "Once upon a time", 100, *session), first).ok());
  REQUIRE(first->Wait().ok());  // the session now holds 5 + 100 tokens

  auto sink = std::make_shared<CollectingSink>();
  EngineRequest turn = Request(*engine, "", 50, *session);
  turn.prompt_ids = tok.Encode(" Then", false);
  auto refused = engine->Submit(turn, sink);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  std::string message(refused.status().message());
  CHECK_THAT(message, Catch::Contains("the session is full"));
  CHECK_THAT(message, Catch::Contains("holds 105 tokens of the model's 128-token context"));
  CHECK_THAT(message, Catch::Contains("delete the session and start a new one"));

  // A turn whose prompt alone overflows: the same, without advice about max_new_tokens.
  turn.prompt_ids.assign(30, 300);
  turn.decoding.max_new_tokens = 1;
  refused = engine->Submit(turn, sink);
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  message = std::string(refused.status().message());
  CHECK_THAT(message, Catch::Contains("the session is full"));
  CHECK_THAT(message, Catch::Contains("the prompt is 135 tokens"));

  // Without a session the same sizes stay a plain INVALID_ARGUMENT about the prompt.
  EngineRequest alone = Request(*engine, "", 1);
  alone.prompt_ids.assign(130, 300);
  CHECK(engine->Submit(alone, sink).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a session's turn sent before the engine hears of the last turn's cancel waits for it",
          "[engine][lifecycle][session]") {
  // The race a chat frontend's Stop-then-send makes: the client has seen its cancel, the server
  // not yet, when the next turn arrives. That turn waits for the session instead of failing.
  Freezer freezer;
  EngineOptions o;
  o.step_observer = freezer.Observer();
  auto engine = MakeEngine(o);
  const Tokenizer& tok = engine->model().tokenizer();
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  EngineRequest turn = Request(*engine, "Once upon a time", 400, *session);
  auto cancelled = std::make_shared<CollectingSink>();
  auto cancelled_id = engine->Submit(turn, cancelled);
  REQUIRE(cancelled_id.ok());
  WaitForDeltas(*cancelled, 3);

  EngineRequest next = Request(*engine, "Once upon a time", 6, *session);
  auto next_sink = std::make_shared<CollectingSink>();
  auto next_id = engine->Submit(next, next_sink);
  INFO(next_id.status().ToString());
  REQUIRE(next_id.ok());  // queued behind the running turn, not FAILED_PRECONDITION
  CHECK(engine->Stats().queued == 1);
  engine->Cancel(*cancelled_id);  // the cancel arrives after the next turn
  const auto& res = next_sink->Wait();
  INFO(res.status().ToString());
  REQUIRE(res.ok());
  // Built on the empty conversation, as the cancelled turn left it.
  EngineRequest alone = Request(*engine, "Once upon a time", 6);
  auto alone_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(alone, alone_sink).ok());
  REQUIRE(alone_sink->Wait().ok());
  CHECK(res->hypotheses[0].ids == alone_sink->Wait()->hypotheses[0].ids);

  // A turn sent while another one runs to its answer is still refused (one turn at a time):
  // the conversation it was built on is gone.
  EngineRequest answering = Request(*engine, "", 40, *session);
  answering.prompt_ids = tok.Encode(" Then", false);
  auto answering_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(answering, answering_sink).ok());
  WaitForDeltas(*answering_sink, 1);
  freezer.Freeze();
  auto late_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(answering, late_sink).ok());
  freezer.Thaw();
  REQUIRE(answering_sink->Wait().ok());
  CHECK(late_sink->Wait().status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(late_sink->Wait().status().message()), Catch::Contains("changed"));
  CHECK(engine->GetSessionAttachment(*session)->version == 2);
}

TEST_CASE("a session's turn waits for a running turn only so long",
          "[engine][lifecycle][session]") {
  EngineOptions o;
  o.session_busy_wait = absl::Milliseconds(100);
  auto engine = MakeEngine(o);
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  EngineRequest turn = Request(*engine, "Once upon a time", 400, *session);
  turn.decoding.use_cache = false;  // slow: every step recomputes the sequence
  auto running = std::make_shared<CollectingSink>();
  auto running_id = engine->Submit(turn, running);
  REQUIRE(running_id.ok());
  WaitForDeltas(*running, 1);
  const absl::Time start = absl::Now();
  auto refused = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(Request(*engine, "Once", 4, *session), refused).ok());
  const auto& res = refused->Wait();
  CHECK(res.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(res.status().message()), Catch::Contains("already has a request running"));
  CHECK(absl::Now() - start >= absl::Milliseconds(100));
  CHECK(running->done_calls() == 0);
  engine->Cancel(*running_id);
  running->Wait();

  // With no wait the refusal comes from Submit itself.
  EngineOptions at_once;
  at_once.session_busy_wait = absl::ZeroDuration();
  auto strict = MakeEngine(at_once);
  auto s2 = strict->CreateSession();
  REQUIRE(s2.ok());
  turn.session_id = *s2;
  auto first = std::make_shared<CollectingSink>();
  auto first_id = strict->Submit(turn, first);
  REQUIRE(first_id.ok());
  auto second =
      strict->Submit(Request(*strict, "Once", 4, *s2), std::make_shared<CollectingSink>());
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  strict->Cancel(*first_id);
  first->Wait();
}

TEST_CASE("a generation left to run to the context stops with the context full, not past it",
          "[engine][lifecycle][session]") {
  EngineOptions o;
  o.model.llama.n_ctx = 128;
  auto engine = MakeEngine(o);
  auto session = engine->CreateSession();
  REQUIRE(session.ok());
  // No max_new_tokens from the client: the server's default with stop_at_context_limit.
  EngineRequest turn = Request(*engine, "Once upon a time", 1000, *session);
  turn.decoding.stop_at_context_limit = true;
  const int prompt = static_cast<int>(turn.prompt_ids.size());
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(turn, sink).ok());
  const auto& res = sink->Wait();
  REQUIRE(res.ok());
  CHECK(res->finish_reason == FinishReason::kContextFull);
  CHECK(prompt + static_cast<int>(res->hypotheses[0].ids.size()) == 128);

  EngineRequest next = Request(*engine, "", 1, *session);
  next.prompt_ids = {300};
  auto refused = engine->Submit(next, std::make_shared<CollectingSink>());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("holds 128 tokens of the model's 128-token context"));

  // Without a session: the same bound.
  EngineRequest plain = Request(*engine, "Once upon a time", 1000);
  plain.decoding.stop_at_context_limit = true;
  auto plain_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(plain, plain_sink).ok());
  REQUIRE(plain_sink->Wait().ok());
  CHECK(prompt + static_cast<int>(plain_sink->Wait()->hypotheses[0].ids.size()) == 128);
}

}  // namespace engine_lifecycle_test
}  // namespace textgen
