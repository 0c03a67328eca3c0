// Speculative decoding in the scheduler: a batch of mixed requests (greedy, seeded sampling,
// beams; n-gram drafts, a prediction, a draft model, none) run at once gives every request the
// tokens it gets alone without speculation, in both compute modes; drafts stop when more
// streams decode than EngineOptions::max_speculative_streams; every block returns to the pools.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_speculative_test {

using testing::CollectingSink;

std::unique_ptr<Engine> MakeEngine(ops::LinearCompute compute, int max_speculative_streams) {
  EngineOptions o;
  o.model_path = testing::ModelPath("TinyStories-656K-F32.gguf");
  o.model.llama.linear.compute = compute;
  o.kv_blocks = 2048;
  o.draft_model_path = testing::ModelPath("TinyStories-656K-Q8_0.gguf");
  o.draft_kv_cache_mib = 64;
  o.max_speculative_streams = max_speculative_streams;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

// Request i: greedy, seeded sampling or beams; drafts by n-gram, draft model, a prediction or
// none.
std::vector<EngineRequest> MixedRequests(const Engine& e) {
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben went to the park.",
                                            "Tom had a big red ball. One day, he", "Mom said"};
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r;
    r.prompt_ids = e.model().tokenizer().Encode(prompts[i % prompts.size()], true);
    r.decoding.max_new_tokens = 120;
    r.decoding.ignore_eos = true;
    if (i % 3 == 1) {
      r.decoding.method = DecodingMethod::kSample;
      r.decoding.sampling.temperature = 0.8f;
      r.decoding.sampling.seed = 7 + i;
    } else if (i == 5) {
      r.decoding.method = DecodingMethod::kBeam;
      r.decoding.beam.num_beams = 2;
      r.decoding.max_new_tokens = 30;
    }
    switch (i % 4) {
      case 0:
        r.decoding.speculation.source = DraftSource::kNgram;
        break;
      case 1:
        r.decoding.speculation.source = DraftSource::kDraftModel;
        break;
      case 2:
        r.prediction_text = "Once upon a time, there was a little girl named Lily.";
        break;
      default:
        break;
    }
    requests.push_back(r);
  }
  return requests;
}

GenerationResult RunOne(Engine& e, const EngineRequest& r) {
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(e.Submit(r, sink).ok());
  const auto& res = sink->Wait();
  REQUIRE(res.ok());
  return *res;
}

void CheckCrowdMatchesPlainSolo(ops::LinearCompute compute, int max_streams, bool expect_drafts) {
  auto engine = MakeEngine(compute, max_streams);
  const std::vector<EngineRequest> requests = MixedRequests(*engine);
  std::vector<std::shared_ptr<CollectingSink>> crowd;
  for (const EngineRequest& r : requests) {
    crowd.push_back(std::make_shared<CollectingSink>());
    REQUIRE(engine->Submit(r, crowd.back()).ok());
  }
  int drafted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& res = crowd[i]->Wait();
    REQUIRE(res.ok());
    EngineRequest plain = requests[i];
    plain.decoding.speculation = {};
    plain.prediction_text.clear();
    const GenerationResult alone = RunOne(*engine, plain);
    INFO("request " << i);
    CHECK(res->hypotheses[0].ids == alone.hypotheses[0].ids);
    CHECK(res->hypotheses[0].logprobs == alone.hypotheses[0].logprobs);
    CHECK(crowd[i]->ids() == res->hypotheses[0].ids);  // the stream carried them all
    CHECK(res->stats.accepted_tokens <= res->stats.drafted_tokens);
    drafted += res->stats.drafted_tokens;
  }
  CHECK((drafted > 0) == expect_drafts);
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

TEST_CASE("speculating requests in a crowd give their plain solo tokens, bf16",
          "[engine][speculative]") {
  CheckCrowdMatchesPlainSolo(ops::LinearCompute::kBf16, 64, true);
}

TEST_CASE("speculating requests in a crowd give their plain solo tokens, f32",
          "[engine][speculative]") {
  CheckCrowdMatchesPlainSolo(ops::LinearCompute::kF32, 64, true);
}

TEST_CASE("no drafts while more streams decode than max_speculative_streams",
          "[engine][speculative]") {
  // With 0 allowed, even a request alone (one decoding stream) never drafts.
  auto engine = MakeEngine(ops::LinearCompute::kF32, 0);
  const std::vector<EngineRequest> requests = MixedRequests(*engine);
  for (const EngineRequest& r : requests) {
    CHECK(RunOne(*engine, r).stats.drafted_tokens == 0);  // alone: 1 stream > 0
  }
}

}  // namespace engine_speculative_test
}  // namespace textgen

namespace textgen {
namespace engine_speculative_test {

TEST_CASE("a session's turns with speculation give the turns without it",
          "[engine][speculative][session]") {
  for (DraftSource source : {DraftSource::kNgram, DraftSource::kDraftModel}) {
    std::vector<std::vector<int32_t>> answers[2];
    for (int spec = 0; spec < 2; ++spec) {
      auto engine = MakeEngine(ops::LinearCompute::kF32, 64);
      auto session = engine->CreateSession();
      REQUIRE(session.ok());
      for (const char* turn : {"Once upon a time", " Then the cat said", " The end."}) {
        EngineRequest r;
        r.prompt_text = turn;
        r.session_id = *session;
        r.decoding.max_new_tokens = 60;
        if (spec == 1) r.decoding.speculation.source = source;
        const GenerationResult res = RunOne(*engine, r);
        answers[spec].push_back(res.hypotheses[0].ids);
        if (answers[spec].size() > 1) CHECK(res.stats.cached_tokens > 0);
      }
      REQUIRE(engine->DeleteSession(*session).ok());
      // The scheduler thread frees a deleted session's blocks at its next turn.
      EngineStats s = engine->Stats();
      for (int i = 0; i < 2000 && s.kv_blocks_free != s.kv_blocks_total; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        s = engine->Stats();
      }
      CHECK(s.kv_blocks_free == s.kv_blocks_total);
    }
    CHECK(answers[0] == answers[1]);
  }
}

TEST_CASE("cancelling a speculating request frees every block", "[engine][speculative]") {
  auto engine = MakeEngine(ops::LinearCompute::kF32, 64);
  EngineRequest r;
  r.prompt_ids = engine->model().tokenizer().Encode("Once upon a time", true);
  r.decoding.max_new_tokens = 400;
  r.decoding.ignore_eos = true;
  r.decoding.speculation.source = DraftSource::kDraftModel;
  auto sink = std::make_shared<CollectingSink>();
  auto id = engine->Submit(r, sink);
  REQUIRE(id.ok());
  while (sink->ids().size() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine->Cancel(*id);
  const auto& res = sink->Wait();
  REQUIRE(res.ok());
  CHECK(res->finish_reason == FinishReason::kCancelled);
  EngineStats s = engine->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

}  // namespace engine_speculative_test
}  // namespace textgen
