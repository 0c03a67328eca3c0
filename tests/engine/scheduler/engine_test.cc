// The engine: many requests batched into shared forward passes give the same results as each
// alone; queue bound, cancellation, bad requests and shutdown end every request exactly once.
#include "engine/scheduler/engine.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_test {

using testing::CollectingSink;

std::unique_ptr<Engine> MakeEngine(int kv_blocks = 512, int max_queued = 64) {
  EngineOptions o;
  o.model_path = testing::ModelPath("stories260K.gguf");
  o.kv_blocks = kv_blocks;
  o.max_queued_requests = max_queued;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

EngineRequest Request(const Engine& e, const std::string& prompt, int max_new) {
  EngineRequest r;
  r.prompt_ids = e.model().tokenizer().Encode(prompt, true);
  r.decoding.max_new_tokens = max_new;
  return r;
}

TEST_CASE("batched requests give the same results as each alone", "[engine]") {
  auto engine = MakeEngine();
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben went to the park.",
                                            "The cat sat on the mat and", "Tom had a big red ball"};
  // Alone, one after the other.
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r = Request(*engine, prompts[i], 40 + 10 * static_cast<int>(i));
    if (i == 1) {
      r.decoding.method = DecodingMethod::kSample;
      r.decoding.sampling.temperature = 0.8f;
      r.decoding.sampling.seed = 5;
    }
    if (i == 2) {
      r.decoding.method = DecodingMethod::kBeam;
      r.decoding.beam.num_beams = 3;
    }
    requests.push_back(r);
  }
  std::vector<std::vector<int32_t>> alone;
  for (const EngineRequest& r : requests) {
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    const auto& res = sink->Wait();
    REQUIRE(res.ok());
    alone.push_back(res->hypotheses[0].ids);
  }
  // Together: 8 copies of each in flight at once, all sharing the forward passes.
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int copy = 0; copy < 8; ++copy) {
    for (const EngineRequest& r : requests) {
      sinks.push_back(std::make_shared<CollectingSink>());
      REQUIRE(engine->Submit(r, sinks.back()).ok());
    }
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    const auto& res = sinks[i]->Wait();
    REQUIRE(res.ok());
    CHECK(res->hypotheses[0].ids == alone[i % requests.size()]);
    CHECK(sinks[i]->ids() == res->hypotheses[0].ids);
    CHECK(sinks[i]->text() == res->hypotheses[0].text);
    CHECK(sinks[i]->done_calls() == 1);
  }
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
  CHECK(s.active == 0);
  CHECK(s.queued == 0);
}

TEST_CASE("active sequences count every live beam and drop to 0 when idle", "[engine]") {
  std::atomic<Engine*> engine_ptr{nullptr};
  std::atomic<int> most{0};
  EngineOptions o;
  o.model_path = testing::ModelPath("stories260K.gguf");
  o.kv_blocks = 512;
  // Runs on the scheduler thread after each step, so the stats are that step's.
  o.step_observer = [&](const StepReport&) {
    if (Engine* e = engine_ptr.load()) most = std::max(most.load(), e->Stats().active_sequences);
  };
  auto created = Engine::Create(o);
  REQUIRE(created.ok());
  std::unique_ptr<Engine> engine = std::move(created).value();
  engine_ptr.store(engine.get());
  CHECK(engine->Stats().active_sequences == 0);

  EngineRequest greedy = Request(*engine, "Once upon a time", 30);
  EngineRequest beams = Request(*engine, "Lily and Ben went to the park.", 30);
  beams.decoding.method = DecodingMethod::kBeam;
  beams.decoding.beam.num_beams = 4;
  auto greedy_sink = std::make_shared<CollectingSink>();
  auto beam_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(beams, beam_sink).ok());
  REQUIRE(engine->Submit(greedy, greedy_sink).ok());
  REQUIRE(greedy_sink->Wait().ok());
  REQUIRE(beam_sink->Wait().ok());
  CHECK(most.load() == 5);  // 4 beams and the greedy stream decoding in the same steps
  CHECK(engine->Stats().active_sequences == 0);
  engine_ptr.store(nullptr);
}

TEST_CASE("a pool smaller than the load queues requests instead of failing any", "[engine]") {
  // Each request may hold ceil(5/16) + 2 * (ceil(120/16) + 1) = 1 + 2*9 = 19 blocks at most
  // (greedy: 1 + 9 = 10); 24 blocks admit two greedy requests at a time, so twelve of them
  // must queue. Over-admitting would end some with RESOURCE_EXHAUSTED when decode growth
  // runs out of blocks.
  auto engine = MakeEngine(/*kv_blocks=*/24);
  const EngineRequest r = Request(*engine, "Once upon a time", 120);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 12; ++i) {
    sinks.push_back(std::make_shared<CollectingSink>());
    REQUIRE(engine->Submit(r, sinks.back()).ok());
  }
  std::vector<int32_t> first;
  for (auto& sink : sinks) {
    const auto& res = sink->Wait();
    REQUIRE(res.ok());  // none ended by pool exhaustion
    CHECK(res->hypotheses[0].ids.size() == 120);
    if (first.empty()) first = res->hypotheses[0].ids;
    CHECK(res->hypotheses[0].ids == first);
  }
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

TEST_CASE("a full queue is refused at once", "[engine]") {
  auto engine = MakeEngine(512, /*max_queued=*/2);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    auto sink = std::make_shared<CollectingSink>();
    EngineRequest r = Request(*engine, "Once upon a time", 200);
    r.decoding.ignore_eos = true;
    auto id = engine->Submit(r, sink);
    if (id.ok()) {
      sinks.push_back(sink);
    } else {
      CHECK(id.status().code() == absl::StatusCode::kResourceExhausted);
      CHECK_THAT(std::string(id.status().message()), Catch::Contains("queue full"));
      ++refused;
    }
  }
  CHECK(refused > 0);
  for (auto& s : sinks) REQUIRE(s->Wait().ok());
}

TEST_CASE("cancelling frees the request's blocks at the next step", "[engine]") {
  auto engine = MakeEngine();
  auto sink = std::make_shared<CollectingSink>();
  EngineRequest r = Request(*engine, "Once upon a time", 1500);
  r.decoding.ignore_eos = true;
  r.decoding.method = DecodingMethod::kBeam;
  r.decoding.beam.num_beams = 4;
  auto id = engine->Submit(r, sink);
  REQUIRE(id.ok());
  while (sink->deltas() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->Cancel(*id);
  const auto& res = sink->Wait();
  REQUIRE(res.ok());
  CHECK(res->finish_reason == FinishReason::kCancelled);
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
  engine->Cancel(*id);  // finished ids are ignored
  engine->Cancel(987654);
}

TEST_CASE("bad requests are refused naming the problem", "[engine]") {
  auto engine = MakeEngine(/*kv_blocks=*/8);
  auto sink = std::make_shared<CollectingSink>();
  EngineRequest bad_id = Request(*engine, "Once", 10);
  bad_id.prompt_ids.push_back(100000);
  auto a = engine->Submit(bad_id, sink);
  CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("100000"));
  EngineRequest beams = Request(*engine, "Once", 10);
  beams.decoding.method = DecodingMethod::kBeam;
  beams.decoding.beam.num_beams = 20;
  CHECK(engine->Submit(beams, sink).status().code() == absl::StatusCode::kInvalidArgument);
  EngineRequest huge = Request(*engine, "Once", 10);
  huge.prompt_ids.assign(500, 5);  // 8 blocks of 16 cannot hold it
  auto h = engine->Submit(huge, sink);
  CHECK(h.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(engine->Submit(Request(*engine, "Once", 10), nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("shutting down ends every request exactly once", "[engine]") {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  {
    auto engine = MakeEngine();
    for (int i = 0; i < 10; ++i) {
      sinks.push_back(std::make_shared<CollectingSink>());
      EngineRequest r = Request(*engine, "Once upon a time", 1500);
      r.decoding.ignore_eos = true;
      REQUIRE(engine->Submit(r, sinks.back()).ok());
    }
  }
  for (auto& s : sinks) {
    s->Wait();
    CHECK(s->done_calls() == 1);
  }
}

}  // namespace engine_test
}  // namespace textgen

namespace textgen {
namespace engine_test {

TEST_CASE("a session keeps its KV cache between turns", "[engine][session]") {
  auto engine = MakeEngine();
  auto id = engine->CreateSession();
  REQUIRE(id.ok());
  CHECK(id->size() == 32);
  const Tokenizer& tok = engine->model().tokenizer();

  auto turn = [&](const std::string& text, const std::string& session, int max_new) {
    EngineRequest r;
    r.prompt_text = text;
    r.session_id = session;
    r.decoding.max_new_tokens = max_new;
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    absl::StatusOr<GenerationResult> res = sink->Wait();
    REQUIRE(res.ok());
    return *res;
  };
  GenerationResult t1 = turn("Once upon a time", *id, 30);
  CHECK(t1.stats.cached_tokens == 0);
  GenerationResult t2 = turn(" Then the dog", *id, 30);
  const int first_turn_len = t1.stats.prompt_tokens + t1.stats.generated_tokens;
  CHECK(t2.stats.cached_tokens == first_turn_len);
  CHECK(t2.stats.prompt_tokens ==
        first_turn_len + static_cast<int>(tok.Encode(" Then the dog", false).size()));

  // The same conversation sent whole, without a session, gives the same answer.
  std::vector<int32_t> whole = tok.Encode("Once upon a time", true);
  whole.insert(whole.end(), t1.hypotheses[0].ids.begin(), t1.hypotheses[0].ids.end());
  std::vector<int32_t> second = tok.Encode(" Then the dog", false);
  whole.insert(whole.end(), second.begin(), second.end());
  EngineRequest r;
  r.prompt_ids = whole;
  r.decoding.max_new_tokens = 30;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(r, sink).ok());
  REQUIRE(sink->Wait().ok());
  CHECK(sink->Wait()->hypotheses[0].ids == t2.hypotheses[0].ids);
  // The session published its conversation's blocks (the partly filled last one too, or rows
  // of a full one copied): the prefix cache serves all but the last prompt token (which must
  // run).
  CHECK(sink->Wait()->stats.cached_tokens == static_cast<int>(whole.size() - 1));

  // Beam search turns keep the conversation too.
  EngineRequest b;
  b.prompt_text = " The end";
  b.session_id = *id;
  b.decoding.method = DecodingMethod::kBeam;
  b.decoding.beam.num_beams = 3;
  b.decoding.max_new_tokens = 10;
  auto bs = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(b, bs).ok());
  REQUIRE(bs->Wait().ok());
  CHECK(bs->Wait()->stats.cached_tokens == t2.stats.prompt_tokens + t2.stats.generated_tokens);

  EngineStats s = engine->Stats();
  CHECK(s.sessions == 1);
  CHECK(s.kv_blocks_free < s.kv_blocks_total);  // the session holds its blocks
  REQUIRE(engine->DeleteSession(*id).ok());
  CHECK(engine->DeleteSession(*id).code() == absl::StatusCode::kNotFound);
  // Blocks come back once the scheduler has collected the session.
  for (int i = 0; i < 200 && engine->Stats().kv_blocks_free != s.kv_blocks_total; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(engine->Stats().kv_blocks_free == s.kv_blocks_total);
  EngineRequest after;
  after.prompt_text = "hi";
  after.session_id = *id;
  CHECK(engine->Submit(after, std::make_shared<CollectingSink>()).status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("session ids: client-chosen, malformed, taken, busy", "[engine][session]") {
  auto engine = MakeEngine();
  const std::string mine = "0123456789abcdef0123456789abcdef";
  auto a = engine->CreateSession(mine);
  REQUIRE(a.ok());
  CHECK(*a == mine);
  CHECK(engine->CreateSession(mine).status().code() == absl::StatusCode::kAlreadyExists);
  for (const char* bad : {"xyz", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef"}) {
    CHECK(engine->CreateSession(bad).status().code() == absl::StatusCode::kInvalidArgument);
  }
  auto r1 = engine->CreateSession();
  auto r2 = engine->CreateSession();
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  CHECK(*r1 != *r2);

  EngineRequest long_turn;
  long_turn.prompt_text = "Once upon a time";
  long_turn.session_id = mine;
  long_turn.decoding.max_new_tokens = 1500;
  long_turn.decoding.ignore_eos = true;
  auto sink = std::make_shared<CollectingSink>();
  auto id = engine->Submit(long_turn, sink);
  REQUIRE(id.ok());
  // A second turn waits for the session (EngineOptions::session_busy_wait; its refusal when the
  // first answers or outlasts the wait is in engine_lifecycle_test.cc). Cancelled here.
  auto second_sink = std::make_shared<CollectingSink>();
  auto second = engine->Submit(long_turn, second_sink);
  REQUIRE(second.ok());
  engine->Cancel(*second);
  CHECK(absl::IsCancelled(second_sink->Wait().status()));
  engine->Cancel(*id);
  sink->Wait();  // cancelled: a result, or CancelledError if it had not started yet
  // Free again once the first is done.
  long_turn.decoding.max_new_tokens = 5;
  auto third_sink = std::make_shared<CollectingSink>();
  REQUIRE(engine->Submit(long_turn, third_sink).ok());
  CHECK(third_sink->Wait().ok());
}

TEST_CASE("idle sessions give up their blocks under KV pressure", "[engine][session]") {
  auto engine = MakeEngine(/*kv_blocks=*/40);
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    auto id = engine->CreateSession();
    REQUIRE(id.ok());
    ids.push_back(*id);
    EngineRequest r;
    r.prompt_text = "Once upon a time";
    r.session_id = *id;
    r.decoding.max_new_tokens = 100;
    r.decoding.ignore_eos = true;
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    // Each turn holds ~7 blocks: 6 sessions cannot all keep theirs in 40 blocks.
    REQUIRE(sink->Wait().ok());
  }
  // Every session still continues (evicted ones recompute their tokens).
  for (const std::string& id : ids) {
    EngineRequest r;
    r.prompt_text = " The end.";
    r.session_id = id;
    r.decoding.max_new_tokens = 5;
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE(engine->Submit(r, sink).ok());
    REQUIRE(sink->Wait().ok());
  }
}

TEST_CASE("the KV cache type follows the compute mode unless asked", "[engine][kv_type]") {
  CHECK(AutoKvType(ops::LinearCompute::kBf16) == KvType::kBf16);
  CHECK(AutoKvType(ops::LinearCompute::kF32) == KvType::kF32);
  struct Case {
    ops::LinearCompute compute;
    std::optional<KvType> asked;
    KvType want;
  };
  const Case cases[] = {
      {ops::LinearCompute::kF32, std::nullopt, KvType::kF32},
      {ops::LinearCompute::kBf16, std::nullopt, KvType::kBf16},
      {ops::LinearCompute::kBf16, KvType::kF32, KvType::kF32},
      {ops::LinearCompute::kF32, KvType::kBf16, KvType::kBf16},
  };
  int f32_blocks = 0, bf16_blocks = 0;
  for (const Case& c : cases) {
    EngineOptions o;
    o.model_path = testing::ModelPath("stories260K.gguf");
    o.model.llama.linear.compute = c.compute;
    o.kv_type = c.asked;
    o.kv_cache_mib = 4;
    auto e = Engine::Create(o);
    REQUIRE(e.ok());
    CHECK((*e)->kv_type() == c.want);
    (c.want == KvType::kBf16 ? bf16_blocks : f32_blocks) = (*e)->Stats().kv_blocks_total;
    // Either cache serves a request.
    auto sink = std::make_shared<CollectingSink>();
    REQUIRE((*e)->Submit(Request(**e, "Once upon a time", 20), sink).ok());
    const auto& res = sink->Wait();
    REQUIRE(res.ok());
    CHECK(res->hypotheses[0].ids.size() == 20);
    CHECK_THAT(sink->text(), Catch::StartsWith(", there was a little"));
  }
  // The same MiB hold twice the blocks (stories260K: 5 layers x 4 kv heads x 16 x 8 dims).
  CHECK(f32_blocks == (4 << 20) / (5 * 2 * 4 * 16 * 8 * 4));
  CHECK(bf16_blocks == (4 << 20) / (5 * 2 * 4 * 16 * 8 * 2));  // 409: twice 204.8, floored
  CHECK(bf16_blocks >= 2 * f32_blocks);
}

}  // namespace engine_test
}  // namespace textgen
