// The engine: many requests batched into shared forward passes give the same results as each
// alone; queue bound, cancellation, bad requests and shutdown end every request exactly once.
#include "engine/scheduler/engine.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "tests/test_util.h"

namespace textgen {
namespace {

// Collects a request's stream; Wait() blocks until OnDone.
class CollectingSink : public GenerationSink {
 public:
  void OnDelta(const StreamDelta& d) override {
    absl::MutexLock lock(&mu_);
    for (const auto& t : d.tokens) ids_.push_back(t.id);
    text_ += d.text;
    ++deltas_;
  }
  void OnDone(absl::StatusOr<GenerationResult> r) override {
    {
      absl::MutexLock lock(&mu_);
      ++done_calls_;
      result_ = std::move(r);
    }
    done_.Notify();
  }
  const absl::StatusOr<GenerationResult>& Wait() {
    done_.WaitForNotification();
    return result_;
  }
  std::vector<int32_t> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }
  int deltas() {
    absl::MutexLock lock(&mu_);
    return deltas_;
  }
  int done_calls() {
    absl::MutexLock lock(&mu_);
    return done_calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int32_t> ids_;
  std::string text_;
  int deltas_ = 0;
  int done_calls_ = 0;
  absl::StatusOr<GenerationResult> result_ = absl::UnknownError("not done");
  absl::Notification done_;
};

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
  r.prompt = e.model().tokenizer().Encode(prompt, true);
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
  bad_id.prompt.push_back(100000);
  auto a = engine->Submit(bad_id, sink);
  CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("100000"));
  EngineRequest beams = Request(*engine, "Once", 10);
  beams.decoding.method = DecodingMethod::kBeam;
  beams.decoding.beam.num_beams = 20;
  CHECK(engine->Submit(beams, sink).status().code() == absl::StatusCode::kInvalidArgument);
  EngineRequest huge = Request(*engine, "Once", 10);
  huge.prompt.assign(500, 5);  // 8 blocks of 16 cannot hold it
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

}  // namespace
}  // namespace textgen
