// Chunked prefill: a prompt (or a cache-off recompute, or a session's catch-up) run over several
// passes of at most `budget` tokens gives the same tokens as one pass, every pass stays within
// the budget, chunks that do not end a feed ask for no logits, and cancelling mid-prefill frees
// every block.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/model/model.h"
#include "tests/engine/decoding/generation_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace generation_prefill_test {

struct Fixture : testing::ModelWithCache {
  using ModelWithCache::ModelWithCache;
  // `n` tokens of story text (BOS first), repeated as needed.
  std::vector<int32_t> LongPrompt(size_t n) const {
    const std::string story =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "park with her dog Max. One day, Lily saw a big red ball under a tree. ";
    std::string text;
    std::vector<int32_t> ids;
    while (ids.size() < n) {
      text += story;
      ids = model->tokenizer().Encode(text, true);
    }
    ids.resize(n);
    return ids;
  }
  absl::StatusOr<GenerationResult> Run(const std::vector<int32_t>& prompt, const DecodingOptions& o,
                                       int budget) {
    return Generate(model->lm(), model->tokenizer(), *cache, prompt, o, nullptr, budget);
  }
  bool AllFree() const { return cache->num_free_blocks() == cache->num_total_blocks(); }
};

// One pass of a manually driven generation.
struct Pass {
  int tokens = 0;
  int logits_rows = 0;
  bool prompt_work = false;  // prefilling() before the pass
};

// Drives `g` to the end with `budget`, recording every pass; checks each pass's logits.
std::vector<Pass> Drive(Fixture& f, Generation& g, int budget) {
  std::vector<Pass> passes;
  std::vector<ForwardSeq> seqs;
  std::vector<float> logits;
  while (!g.done()) {
    Pass p;
    p.prompt_work = g.prefilling();
    seqs.clear();
    REQUIRE(g.PrepareStep(&seqs, budget).ok());
    if (g.done()) break;
    REQUIRE(!seqs.empty());
    for (const ForwardSeq& s : seqs) {
      p.tokens += static_cast<int>(s.tokens.size());
      p.logits_rows += s.logits ? 1 : 0;
    }
    REQUIRE(f.model->lm().Forward(*f.cache, absl::MakeSpan(seqs), &logits).ok());
    REQUIRE(logits.size() == static_cast<size_t>(p.logits_rows) * f.model->config().n_vocab);
    REQUIRE(g.ConsumeStep(logits.data()).ok());
    passes.push_back(p);
  }
  return passes;
}

void CheckSame(const GenerationResult& a, const GenerationResult& b) {
  REQUIRE(a.hypotheses.size() == b.hypotheses.size());
  for (size_t i = 0; i < a.hypotheses.size(); ++i) {
    const Hypothesis& x = a.hypotheses[i];
    const Hypothesis& y = b.hypotheses[i];
    CHECK(x.ids == y.ids);
    CHECK(x.text == y.text);
    REQUIRE(x.logprobs.size() == y.logprobs.size());
    double max_diff = 0;
    for (size_t k = 0; k < x.logprobs.size(); ++k) {
      max_diff = std::max(max_diff, std::abs(x.logprobs[k] - y.logprobs[k]));
    }
    CHECK(max_diff < 1e-4);
  }
  CHECK(a.finish_reason == b.finish_reason);
}

DecodingOptions Greedy(int max_new) {
  DecodingOptions o;
  o.max_new_tokens = max_new;
  o.ignore_eos = true;
  return o;
}

DecodingOptions Sampled(int max_new, uint64_t seed) {
  DecodingOptions o = Greedy(max_new);
  o.method = DecodingMethod::kSample;
  o.sampling.temperature = 0.9f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = seed;
  return o;
}

DecodingOptions Beam4(int max_new) {
  DecodingOptions o;
  o.method = DecodingMethod::kBeam;
  o.max_new_tokens = max_new;
  o.beam.num_beams = 4;
  o.beam.num_return_sequences = 4;
  o.ignore_eos = true;
  return o;
}

TEST_CASE("a long prompt prefilled in chunks gives the same tokens as in one pass",
          "[generation][prefill]") {
  for (const char* name : {"stories260K.gguf", "TinyStories-656K-F32.gguf"}) {
    Fixture f(name);
    const std::vector<int32_t> prompt = f.LongPrompt(400);  // of a 512-token context
    for (const DecodingOptions& o : {Greedy(60), Sampled(60, 1234), Beam4(40)}) {
      auto whole = f.Run(prompt, o, kUnlimitedTokens);
      REQUIRE(whole.ok());
      REQUIRE(whole->hypotheses[0].ids.size() >= 10);
      for (int budget : {7, 64}) {
        INFO(name << ", method " << static_cast<int>(o.method) << ", budget " << budget);
        auto chunked = f.Run(prompt, o, budget);
        REQUIRE(chunked.ok());
        CheckSame(*chunked, *whole);
        CHECK(chunked->stats.prompt_tokens == 400);
      }
    }
    CHECK(f.AllFree());
  }
}

TEST_CASE("every pass stays within the budget and only a prompt's last chunk has logits",
          "[generation][prefill]") {
  Fixture f("stories260K.gguf");
  const std::vector<int32_t> prompt = f.LongPrompt(400);
  for (int budget : {1, 7, 64, 400, 1000}) {
    for (const DecodingOptions& o : {Greedy(20), Beam4(20)}) {
      INFO("budget " << budget << ", method " << static_cast<int>(o.method));
      int deltas = 0;
      auto g = Generation::Create(f.model->lm(), f.model->tokenizer(), *f.cache, prompt, o,
                                  [&](const StreamDelta&) { ++deltas; });
      REQUIRE(g.ok());
      CHECK((*g)->prefilling());
      CHECK((*g)->pending_prompt_tokens() == 400);
      std::vector<Pass> passes = Drive(f, **g, budget);
      const size_t prefill_passes = (400 + budget - 1) / budget;
      REQUIRE(passes.size() > prefill_passes);
      for (size_t i = 0; i < prefill_passes; ++i) {
        CHECK(passes[i].prompt_work);
        CHECK(passes[i].tokens == std::min(budget, 400 - static_cast<int>(i) * budget));
        CHECK(passes[i].logits_rows == (i + 1 == prefill_passes ? 1 : 0));
      }
      // Then decode passes: one token per live sequence, all with logits.
      for (size_t i = prefill_passes; i < passes.size(); ++i) {
        CHECK_FALSE(passes[i].prompt_work);
        CHECK(passes[i].tokens == passes[i].logits_rows);
      }
      GenerationResult r = (*g)->TakeResult();
      CHECK(r.hypotheses[0].ids.size() == 20);
      CHECK(deltas > 0);
      CHECK(r.stats.time_to_first_token_s > 0);
    }
  }
  CHECK(f.AllFree());
}

TEST_CASE("cache-off recomputes and the sliding window run in chunks too",
          "[generation][prefill]") {
  Fixture f("TinyStories-656K-F32.gguf");  // 512-token context
  const std::vector<int32_t> prompt = f.LongPrompt(400);
  // Cache off: every step recomputes every sequence's window, which is prompt work.
  for (const DecodingOptions& base : {Greedy(12), Beam4(8)}) {
    DecodingOptions o = base;
    o.use_cache = false;
    auto whole = f.Run(prompt, o, kUnlimitedTokens);
    REQUIRE(whole.ok());
    auto chunked = f.Run(prompt, o, 33);
    REQUIRE(chunked.ok());
    CheckSame(*chunked, *whole);
    auto g = Generation::Create(f.model->lm(), f.model->tokenizer(), *f.cache, prompt, o);
    REQUIRE(g.ok());
    for (const Pass& p : Drive(f, **g, 33)) {
      CHECK(p.prompt_work);
      CHECK(p.tokens <= 33);
    }
  }
  // Sliding window: a long prompt in chunks, then generation far past the context.
  DecodingOptions slide = Greedy(300);
  slide.context_overflow = ContextOverflow::kSlide;
  slide.n_keep = 1;
  auto whole = f.Run(prompt, slide, kUnlimitedTokens);
  auto chunked = f.Run(prompt, slide, 7);
  REQUIRE(whole.ok());
  REQUIRE(chunked.ok());
  CHECK(chunked->stats.context_shifts > 0);
  CHECK(chunked->stats.context_shifts == whole->stats.context_shifts);
  CheckSame(*chunked, *whole);
  CHECK(f.AllFree());
}

TEST_CASE("a session turn prefills its new tokens and catches up its answer in chunks",
          "[generation][prefill][session]") {
  Fixture f("stories260K.gguf");
  const Tokenizer& tok = f.model->tokenizer();
  const int budget = 5;
  for (const DecodingOptions& first_opts : {Greedy(30), Beam4(30)}) {
    INFO("first turn method " << static_cast<int>(first_opts.method));
    const std::vector<int32_t> first = f.LongPrompt(150);
    auto g1 = Generation::Create(f.model->lm(), tok, *f.cache, first, first_opts);
    REQUIRE(g1.ok());
    (*g1)->KeepCacheForNextTurn();
    std::vector<Pass> passes = Drive(f, **g1, budget);
    // The answer's K/V are caught up after its last token, in chunks without logits.
    REQUIRE(!passes.empty());
    CHECK(passes.back().prompt_work);
    CHECK(passes.back().logits_rows == 0);
    for (const Pass& p : passes) {
      if (p.prompt_work) CHECK(p.tokens <= budget);
    }
    GenerationResult r1 = (*g1)->TakeResult();
    std::vector<int32_t> conversation = first;
    conversation.insert(conversation.end(), r1.hypotheses[0].ids.begin(),
                        r1.hypotheses[0].ids.end());
    BlockTable kept = (*g1)->ReleaseCache();
    CHECK(kept.num_tokens == static_cast<int>(conversation.size()));
    g1->reset();

    const std::vector<int32_t> turn = tok.Encode(" Then the dog ran to the big tree.", false);
    conversation.insert(conversation.end(), turn.begin(), turn.end());
    const int cached = kept.num_tokens;
    DecodingOptions second = Greedy(30);
    auto g2 =
        Generation::Create(f.model->lm(), tok, *f.cache, conversation, second, nullptr, &kept);
    REQUIRE(g2.ok());
    CHECK((*g2)->pending_prompt_tokens() == static_cast<int>(turn.size()));
    std::vector<Pass> passes2 = Drive(f, **g2, budget);
    const size_t prefill_passes = (turn.size() + budget - 1) / budget;
    for (size_t i = 0; i < prefill_passes; ++i) CHECK(passes2[i].prompt_work);
    CHECK_FALSE(passes2[prefill_passes].prompt_work);
    GenerationResult r2 = (*g2)->TakeResult();
    CHECK(r2.stats.cached_tokens == cached);
    // The same conversation sent whole, unchunked and without a cache.
    auto whole = f.Run(conversation, second, kUnlimitedTokens);
    REQUIRE(whole.ok());
    CHECK(whole->stats.cached_tokens == 0);
    CheckSame(r2, *whole);
  }
  CHECK(f.AllFree());
}

TEST_CASE("cancelling in the middle of a chunked prefill frees every block",
          "[generation][prefill]") {
  Fixture f("stories260K.gguf");
  const std::vector<int32_t> prompt = f.LongPrompt(400);
  for (const DecodingOptions& o : {Greedy(20), Beam4(20)}) {
    int deltas = 0;
    auto g = Generation::Create(f.model->lm(), f.model->tokenizer(), *f.cache, prompt, o,
                                [&](const StreamDelta& d) { deltas += d.tokens.empty() ? 0 : 1; });
    REQUIRE(g.ok());
    std::vector<ForwardSeq> seqs;
    std::vector<float> logits;
    for (int pass = 0; pass < 5; ++pass) {
      seqs.clear();
      REQUIRE((*g)->PrepareStep(&seqs, 16).ok());
      REQUIRE(f.model->lm().Forward(*f.cache, absl::MakeSpan(seqs), &logits).ok());
      REQUIRE((*g)->ConsumeStep(logits.data()).ok());
    }
    CHECK((*g)->prefilling());
    CHECK((*g)->pending_prompt_tokens() == 400 - 5 * 16);
    CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks() - 5);  // 80 tokens
    (*g)->Cancel();
    seqs.clear();
    REQUIRE((*g)->PrepareStep(&seqs, 16).ok());
    CHECK(seqs.empty());
    REQUIRE((*g)->done());
    CHECK(f.AllFree());
    GenerationResult r = (*g)->TakeResult();
    CHECK(r.finish_reason == FinishReason::kCancelled);
    CHECK(r.hypotheses.at(0).ids.empty());
    CHECK(deltas == 0);
  }
}

TEST_CASE("Generate rejects a budget below one token", "[generation][prefill]") {
  Fixture f("stories260K.gguf", 8);
  auto r = f.Run(f.LongPrompt(10), Greedy(5), 0);
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("max_step_tokens"));
}

}  // namespace generation_prefill_test
}  // namespace textgen
