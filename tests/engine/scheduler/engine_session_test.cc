// Sessions fed the whole conversation each turn (SessionPrompt::kWhole): the engine reuses the
// K/V of the longest token prefix shared with what the session holds and recomputes the rest;
// the caller's attachment travels with the session.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_session_test {

using testing::CollectingSink;

std::unique_ptr<Engine> MakeExactEngine() {
  EngineOptions o;
  o.model_path = testing::ModelPath("stories260K.gguf");
  o.kv_blocks = 256;
  o.kv_block_size = 16;
  // F32 arithmetic: a recomputed prefix gives the same logits as a cached one.
  o.model.llama.linear.compute = ops::LinearCompute::kF32;
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

GenerationResult Run(Engine& engine, EngineRequest r) {
  auto sink = std::make_shared<CollectingSink>();
  auto id = engine.Submit(std::move(r), sink);
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  const absl::StatusOr<GenerationResult>& res = sink->Wait();
  INFO(res.status().ToString());
  REQUIRE(res.ok());
  return *res;
}

EngineRequest Whole(const std::vector<int32_t>& prompt, const std::string& session) {
  EngineRequest r;
  r.prompt_ids = prompt;
  r.session_id = session;
  r.session_prompt = SessionPrompt::kWhole;
  r.decoding.max_new_tokens = 12;
  r.decoding.ignore_eos = true;  // answers of a known length
  r.session_attachment = [](const GenerationResult& g) { return g.hypotheses[0].text; };
  return r;
}

int SharedPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return static_cast<int>(n);
}

TEST_CASE("whole-conversation turns reuse the shared prefix and recompute the rest",
          "[engine][session]") {
  auto engine = MakeExactEngine();
  const Tokenizer& tok = engine->model().tokenizer();
  auto id = engine->CreateSession();
  REQUIRE(id.ok());
  auto concat = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  auto alone = [&](const std::vector<int32_t>& prompt) { return Run(*engine, Whole(prompt, "")); };

  const std::vector<int32_t> p1 = tok.Encode("Once upon a time", true);
  GenerationResult t1 = Run(*engine, Whole(p1, *id));
  CHECK(t1.stats.cached_tokens == 0);
  auto snap = engine->GetSessionAttachment(*id);
  REQUIRE(snap.ok());
  CHECK(snap->version == 1);
  CHECK(snap->attachment == t1.hypotheses[0].text);

  // Turn 2 extends turn 1: everything held is reused.
  const std::vector<int32_t> held1 = concat(p1, t1.hypotheses[0].ids);
  const std::vector<int32_t> p2 = concat(held1, tok.Encode(" Then the dog ran", false));
  GenerationResult t2 = Run(*engine, Whole(p2, *id));
  CHECK(t2.stats.cached_tokens == static_cast<int>(held1.size()));
  CHECK(t2.hypotheses[0].ids == alone(p2).hypotheses[0].ids);

  // Turn 3 rewrites the conversation after a few tokens (mid-block): only those are reused,
  // and the answer is the one of the new prompt alone.
  const std::vector<int32_t> held2 = concat(p2, t2.hypotheses[0].ids);
  const std::vector<int32_t> p3 =
      concat({held2.begin(), held2.begin() + 5}, tok.Encode(" and a big red frog sat", false));
  REQUIRE(held2.size() > 16);
  GenerationResult t3 = Run(*engine, Whole(p3, *id));
  CHECK(t3.stats.cached_tokens == SharedPrefix(held2, p3));
  CHECK(t3.stats.cached_tokens >= 5);
  CHECK(t3.stats.cached_tokens < 16);
  const GenerationResult t3_alone = alone(p3);
  CHECK(t3.hypotheses[0].ids == t3_alone.hypotheses[0].ids);
  // Up to summation order (the recomputed rows ran in passes of another size).
  REQUIRE(t3.hypotheses[0].logprobs.size() == t3_alone.hypotheses[0].logprobs.size());
  for (size_t i = 0; i < t3.hypotheses[0].logprobs.size(); ++i) {
    CHECK(t3.hypotheses[0].logprobs[i] == Approx(t3_alone.hypotheses[0].logprobs[i]).margin(1e-5));
  }

  // Turn 4 extends the rewritten conversation: the recomputed part is reused in turn.
  const std::vector<int32_t> p4 =
      concat(concat(p3, t3.hypotheses[0].ids), tok.Encode(" The end", false));
  GenerationResult t4 = Run(*engine, Whole(p4, *id));
  CHECK(t4.stats.cached_tokens == static_cast<int>(p3.size() + t3.hypotheses[0].ids.size()));
  CHECK(t4.hypotheses[0].ids == alone(p4).hypotheses[0].ids);
  snap = engine->GetSessionAttachment(*id);
  REQUIRE(snap.ok());
  CHECK(snap->version == 4);
  CHECK(snap->attachment == t4.hypotheses[0].text);

  // A turn built from an older version is refused; the session is untouched.
  EngineRequest stale = Whole(p4, *id);
  stale.session_version = 3;
  auto refused = engine->Submit(std::move(stale), std::make_shared<CollectingSink>());
  CHECK(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("changed"));
  EngineRequest current = Whole(p4, *id);
  current.session_version = 4;
  CHECK(Run(*engine, std::move(current)).hypotheses[0].ids == t4.hypotheses[0].ids);

  REQUIRE(engine->DeleteSession(*id).ok());
  CHECK(engine->GetSessionAttachment(*id).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a cancelled whole-conversation turn leaves the session's conversation usable",
          "[engine][session]") {
  auto engine = MakeExactEngine();
  const Tokenizer& tok = engine->model().tokenizer();
  auto id = engine->CreateSession();
  REQUIRE(id.ok());
  const std::vector<int32_t> p1 = tok.Encode("Once upon a time", true);
  GenerationResult t1 = Run(*engine, Whole(p1, *id));

  // A different conversation, cancelled at once: either before it starts (the session keeps
  // turn 1) or after a few tokens (the session holds the other conversation). Either way the
  // next turn's answer is its own.
  std::vector<int32_t> other = tok.Encode("The cat sat on the mat", true);
  EngineRequest r = Whole(other, *id);
  r.decoding.max_new_tokens = 400;
  auto sink = std::make_shared<CollectingSink>();
  auto rid = engine->Submit(std::move(r), sink);
  REQUIRE(rid.ok());
  engine->Cancel(*rid);
  (void)sink->Wait();

  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), t1.hypotheses[0].ids.begin(), t1.hypotheses[0].ids.end());
  const std::vector<int32_t> more = tok.Encode(" Then", false);
  p2.insert(p2.end(), more.begin(), more.end());
  GenerationResult t2 = Run(*engine, Whole(p2, *id));
  GenerationResult t2_alone = Run(*engine, Whole(p2, ""));
  CHECK(t2.hypotheses[0].ids == t2_alone.hypotheses[0].ids);
  CHECK(t2.stats.cached_tokens > 0);
}

TEST_CASE("a session answers only to the owner that created it", "[engine][session]") {
  auto engine = MakeExactEngine();
  auto id = engine->CreateSession("", "alice");
  REQUIRE(id.ok());
  const std::vector<int32_t> prompt = engine->model().tokenizer().Encode("Once upon a time", true);

  // Another principal (or none) sees exactly what an unknown id gives: NotFound, same message.
  EngineRequest bob = Whole(prompt, *id);
  bob.session_owner = "bob";
  auto submitted = engine->Submit(bob, std::make_shared<CollectingSink>());
  CHECK(absl::IsNotFound(submitted.status()));
  EngineRequest unknown = Whole(prompt, std::string(32, 'f'));
  unknown.session_owner = "bob";
  auto unknown_submitted = engine->Submit(unknown, std::make_shared<CollectingSink>());
  CHECK(absl::IsNotFound(unknown_submitted.status()));
  CHECK(absl::IsNotFound(engine->GetSessionAttachment(*id, "bob").status()));
  CHECK(absl::IsNotFound(engine->GetSessionAttachment(*id).status()));
  CHECK(absl::IsNotFound(engine->DeleteSession(*id, "bob")));

  // The owner still has it, untouched.
  EngineRequest alice = Whole(prompt, *id);
  alice.session_owner = "alice";
  Run(*engine, alice);
  auto snap = engine->GetSessionAttachment(*id, "alice");
  REQUIRE(snap.ok());
  CHECK(snap->version == 1);
  CHECK(engine->DeleteSession(*id, "alice").ok());
}

}  // namespace engine_session_test
}  // namespace textgen
