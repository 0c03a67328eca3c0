// Shared by the engine tests: a sink that collects a request's stream.
#ifndef TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/scheduler/engine.h"
#include "tests/test_util.h"

namespace textgen::testing {

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

// `n` tokens of story text (BOS first); `variant` picks one of several stories.
inline std::vector<int32_t> LongPrompt(const Engine& e, size_t n, int variant = 0) {
  const char* stories[] = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her dog Max. One day, Lily saw a big red ball under a tree. ",
      "Tom had a big blue truck. He liked to push it up the hill and let it roll down fast. His "
      "mom said to be careful, but Tom was happy and laughed. ",
      "The cat sat on the mat and looked at the bird. The bird sang a song in the sun, and the "
      "cat wanted to be its friend. ",
  };
  std::string text;
  std::vector<int32_t> ids;
  while (ids.size() < n) {
    text += stories[variant];
    ids = e.model().tokenizer().Encode(text, true);
  }
  ids.resize(n);
  return ids;
}

// The same tokens exactly; logprobs up to float summation order (a different split of the
// work into passes changes how many rows a matmul sees).
inline void CheckSame(const GenerationResult& a, const GenerationResult& b) {
  REQUIRE(a.hypotheses.size() == b.hypotheses.size());
  for (size_t i = 0; i < a.hypotheses.size(); ++i) {
    CHECK(a.hypotheses[i].ids == b.hypotheses[i].ids);
    REQUIRE(a.hypotheses[i].logprobs.size() == b.hypotheses[i].logprobs.size());
    double max_diff = 0;
    for (size_t k = 0; k < a.hypotheses[i].logprobs.size(); ++k) {
      max_diff =
          std::max(max_diff, std::abs(a.hypotheses[i].logprobs[k] - b.hypotheses[i].logprobs[k]));
    }
    CHECK(max_diff < 1e-4);
  }
}

// An engine on stories260K whose sessions go to `journal`, with F32 arithmetic: a conversation
// recomputed from its stored tokens (after a restart, or on another engine) gives the logits
// its cached KV gave.
inline std::unique_ptr<Engine> MakeJournaledEngine(std::shared_ptr<SessionJournal> journal,
                                                   absl::Duration ttl = absl::Minutes(10)) {
  EngineOptions o;
  o.model_path = ModelPath("stories260K.gguf");
  o.kv_blocks = 256;
  o.model.llama.linear.compute = ops::LinearCompute::kF32;
  o.session_journal = std::move(journal);
  o.session_ttl = ttl;
  auto e = Engine::Create(o);
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  return std::move(e).value();
}

// Runs `r` to its end, which must be an answer: its best hypothesis's ids.
inline std::vector<int32_t> RunToAnswer(Engine& e, EngineRequest r) {
  auto sink = std::make_shared<CollectingSink>();
  auto id = e.Submit(std::move(r), sink);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  const auto& res = sink->Wait();
  INFO(res.status().ToString());
  REQUIRE(res.ok());
  return res->hypotheses[0].ids;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_SCHEDULER_ENGINE_TEST_UTIL_H_
