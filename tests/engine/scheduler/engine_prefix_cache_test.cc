// Automatic prefix caching in the engine (EngineOptions::prefix_cache): a prompt that starts
// with blocks another request computed shares them, and gives exactly what it gives without
// them; eviction under pool pressure; the switch; the counters.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/engine_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace engine_prefix_cache_test {

using testing::CheckSame;
using testing::CollectingSink;

constexpr int kBlockSize = 16;  // EngineOptions' default

std::unique_ptr<Engine> MakeEngine(const std::string& model, bool prefix_cache,
                                   int kv_blocks = 512) {
  EngineOptions o;
  o.model_path = testing::ModelPath(model);
  o.kv_blocks = kv_blocks;
  o.prefix_cache = prefix_cache;
  o.model.llama.linear.compute = ops::LinearCompute::kF32;  // exact: see the rule
  auto e = Engine::Create(o);
  REQUIRE(e.ok());
  return std::move(e).value();
}

// `n` tokens of story text (BOS first), then `question` (no BOS).
std::vector<int32_t> Prompt(const Engine& e, size_t n, const std::string& question) {
  std::vector<int32_t> ids = testing::LongPrompt(e, n);
  std::vector<int32_t> q = e.model().tokenizer().Encode(question, false);
  ids.insert(ids.end(), q.begin(), q.end());
  return ids;
}

std::shared_ptr<CollectingSink> Submit(Engine& e, std::vector<int32_t> prompt,
                                       const DecodingOptions& d) {
  EngineRequest r;
  r.prompt_ids = std::move(prompt);
  r.decoding = d;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(e.Submit(std::move(r), sink).ok());
  return sink;
}

GenerationResult Run(Engine& e, std::vector<int32_t> prompt, const DecodingOptions& d) {
  auto sink = Submit(e, std::move(prompt), d);
  REQUIRE(sink->Wait().ok());
  return *sink->Wait();
}

// Leading tokens `a` and `b` share: what a match may take, whole blocks and then rows copied
// from the block that goes on differently.
int CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<int>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

std::vector<DecodingOptions> Methods() {
  DecodingOptions greedy;
  greedy.max_new_tokens = 24;
  greedy.ignore_eos = true;
  DecodingOptions sample = greedy;
  sample.method = DecodingMethod::kSample;
  sample.sampling.temperature = 0.9f;
  sample.sampling.top_p = 0.95f;
  sample.sampling.seed = 11;
  DecodingOptions beam = greedy;
  beam.method = DecodingMethod::kBeam;
  beam.beam.num_beams = 3;
  beam.max_new_tokens = 12;
  return {greedy, sample, beam};
}

TEST_CASE("a prompt served from cached blocks gives exactly what it gives without them",
          "[engine][prefix]") {
  for (const char* model : {"stories260K.gguf", "TinyStories-656K-F32.gguf"}) {
    INFO(model);
    auto on = MakeEngine(model, true);
    auto off = MakeEngine(model, false);
    const std::vector<int32_t> warm = Prompt(*on, 150, " What did Lily do?");
    std::vector<std::vector<int32_t>> prompts;
    for (const char* q : {" Where was Max?", " Was the ball red?", " Who found the ball?"}) {
      prompts.push_back(Prompt(*on, 150, q));
    }
    const std::vector<DecodingOptions> methods = Methods();
    std::vector<GenerationResult> want;
    for (size_t i = 0; i < methods.size(); ++i) {
      want.push_back(Run(*off, prompts[i], methods[i]));
      CHECK(want.back().stats.cached_tokens == 0);
    }
    Run(*on, warm, methods[0]);
    // Together: the shared blocks are live in three requests at once (the beams fork them).
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (size_t i = 0; i < methods.size(); ++i)
      sinks.push_back(Submit(*on, prompts[i], methods[i]));
    for (size_t i = 0; i < methods.size(); ++i) {
      INFO("method " << i);
      REQUIRE(sinks[i]->Wait().ok());
      const GenerationResult& got = *sinks[i]->Wait();
      CHECK(got.stats.cached_tokens == CommonPrefix(warm, prompts[i]));
      CHECK(got.stats.cached_tokens >= 150 / kBlockSize * kBlockSize);
      CheckSame(got, want[i]);
    }
    // Alone, after they finished: the same again, from idle cached blocks.
    for (size_t i = 0; i < methods.size(); ++i) {
      GenerationResult again = Run(*on, prompts[i], methods[i]);
      CHECK(again.stats.cached_tokens >= 150 / kBlockSize * kBlockSize);
      CheckSame(again, want[i]);
    }
    EngineStats s = on->Stats();
    CHECK(s.kv_blocks_free == s.kv_blocks_total);  // cached blocks count as free
    CHECK(s.kv_blocks_cached > 0);
  }
}

TEST_CASE("a resent conversation is served up to its partly filled last block, exactly",
          "[engine][prefix]") {
  auto on = MakeEngine("stories260K.gguf", true);
  auto off = MakeEngine("stories260K.gguf", false);
  const char* questions[] = {" Where was Max?", " Was the ball red?", " Who found the ball?"};
  const std::vector<DecodingOptions> methods = Methods();
  for (size_t i = 0; i < methods.size(); ++i) {
    INFO("method " << i);
    // Turn 1 (greedy) leaves its K/V: prompt and reply but the reply's last token, which never
    // ran. Turn 2 resends all of it and asks more, as an OpenAI client does.
    std::vector<int32_t> turn1;
    for (size_t n = 90; turn1.empty() || (turn1.size() + 23) % kBlockSize == 0; ++n) {
      turn1 = Prompt(*on, n, questions[i]);  // a length that leaves the last block part full
    }
    const GenerationResult reply = Run(*on, turn1, methods[0]);
    std::vector<int32_t> turn2 = turn1;
    const std::vector<int32_t>& ids = reply.hypotheses.at(0).ids;
    turn2.insert(turn2.end(), ids.begin(), ids.end());
    const std::vector<int32_t> more = on->model().tokenizer().Encode(" Then what?", false);
    turn2.insert(turn2.end(), more.begin(), more.end());
    const int held = static_cast<int>(turn1.size() + ids.size()) - 1;
    REQUIRE(held % kBlockSize != 0);
    const GenerationResult want = Run(*off, turn2, methods[i]);
    const GenerationResult got = Run(*on, turn2, methods[i]);
    CHECK(got.stats.cached_tokens == held);
    CheckSame(got, want);
  }
  EngineStats s = on->Stats();
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

TEST_CASE("a session's first turn shares a prefix another request computed", "[engine][prefix]") {
  auto on = MakeEngine("stories260K.gguf", true);
  auto off = MakeEngine("stories260K.gguf", false);
  const DecodingOptions greedy = Methods()[0];
  const std::vector<int32_t> prompt = Prompt(*on, 100, " Where was Max?");
  const GenerationResult want = Run(*off, prompt, greedy);
  Run(*on, Prompt(*on, 100, " What did Lily do?"), greedy);
  auto session = on->CreateSession();
  REQUIRE(session.ok());
  EngineRequest r;
  r.prompt_ids = prompt;
  r.session_id = *session;
  r.decoding = greedy;
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(on->Submit(r, sink).ok());
  REQUIRE(sink->Wait().ok());
  CHECK(sink->Wait()->stats.cached_tokens ==
        CommonPrefix(prompt, Prompt(*on, 100, " What did Lily do?")));
  CHECK(sink->Wait()->stats.cached_tokens >= 96);
  CheckSame(*sink->Wait(), want);
}

TEST_CASE("cached blocks are evicted when the pool needs them", "[engine][prefix]") {
  // 40 blocks of 16 tokens. A 200-token request leaves ~13 published blocks idle; a request
  // needing 34 then fits only by evicting them (admission counts them as free).
  auto e = MakeEngine("stories260K.gguf", true, 40);
  DecodingOptions d = Methods()[0];
  d.max_new_tokens = 8;
  const std::vector<int32_t> a = Prompt(*e, 200, " Where was Max?");
  const GenerationResult first = Run(*e, a, d);
  CHECK(e->Stats().kv_blocks_cached >= 12);
  CHECK(e->Stats().prefix_cache_evictions == 0);
  // Whole blocks, then the partly filled last one's rows copied from its leaf.
  const int all = static_cast<int>(a.size()) - 1;
  const GenerationResult hit = Run(*e, a, d);
  CHECK(hit.stats.cached_tokens == all);
  CheckSame(hit, first);

  std::vector<int32_t> big;
  for (int32_t i = 0; big.size() < 500; ++i) big.push_back(100 + i % 200);
  const GenerationResult b = Run(*e, big, d);
  CHECK(b.stats.cached_tokens == 0);
  EngineStats s = e->Stats();
  CHECK(s.prefix_cache_evictions > 0);
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
  // What was evicted is computed again, to the same result.
  const GenerationResult again = Run(*e, a, d);
  CHECK(again.stats.cached_tokens < all);
  CheckSame(again, first);
}

TEST_CASE("prefix cache off: nothing is shared, kept or counted", "[engine][prefix]") {
  auto e = MakeEngine("stories260K.gguf", false);
  const DecodingOptions d = Methods()[0];
  const std::vector<int32_t> p = Prompt(*e, 100, " Where was Max?");
  Run(*e, p, d);
  CHECK(Run(*e, p, d).stats.cached_tokens == 0);
  EngineStats s = e->Stats();
  CHECK(s.kv_blocks_cached == 0);
  CHECK(s.prefix_cache_lookups == 0);
  CHECK(s.prefix_cache_hit_tokens == 0);
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

TEST_CASE("prefix cache counters and what a sliding window may share", "[engine][prefix]") {
  auto e = MakeEngine("stories260K.gguf", true);
  DecodingOptions d = Methods()[0];
  const std::vector<int32_t> p = Prompt(*e, 100, " Where was Max?");
  const int len = static_cast<int>(p.size());
  Run(*e, p, d);
  CHECK(Run(*e, p, d).stats.cached_tokens == len - 1);  // the tail block from its leaf
  // The sliding window rotates blocks past n_keep in place: only those before are shared.
  DecodingOptions slide = d;
  slide.context_overflow = ContextOverflow::kSlide;
  slide.n_keep = 0;
  CHECK(Run(*e, p, slide).stats.cached_tokens == 0);
  slide.n_keep = 40;  // rounded up to 3 blocks
  CHECK(Run(*e, p, slide).stats.cached_tokens == 48);
  // Without the cache every step recomputes: nothing to share.
  DecodingOptions nocache = d;
  nocache.use_cache = false;
  nocache.max_new_tokens = 4;
  CHECK(Run(*e, p, nocache).stats.cached_tokens == 0);
  EngineStats s = e->Stats();
  // Requests that may share nothing (n_keep 0, use_cache false) do not look.
  CHECK(s.prefix_cache_lookups == 3);
  CHECK(s.prefix_cache_lookup_tokens == 3 * len);
  CHECK(s.prefix_cache_hit_tokens == len - 1 + 48);
}

}  // namespace engine_prefix_cache_test
}  // namespace textgen
