// Generation on real models: beam search invariants and streaming, seeded sampling alone and
// batched, stop sequences, top logprobs, the sliding window, cancellation and bad options.
#include "engine/decoding/generation.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/ops/threading.h"
#include "tests/engine/decoding/generation_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace generation_test {

struct Fixture : testing::ModelWithCache {
  using ModelWithCache::ModelWithCache;
  std::vector<int32_t> Prompt(const std::string& text) const {
    return model->tokenizer().Encode(text, true);
  }
  absl::StatusOr<GenerationResult> Run(const std::string& prompt, const DecodingOptions& o,
                                       StreamSink sink = nullptr) {
    return Generate(model->lm(), model->tokenizer(), *cache, Prompt(prompt), o, std::move(sink));
  }
};

bool IsPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

DecodingOptions Beam(int beams, float alpha, EarlyStopping es, int max_new = 40) {
  DecodingOptions o;
  o.method = DecodingMethod::kBeam;
  o.max_new_tokens = max_new;
  o.beam.num_beams = beams;
  o.beam.length_penalty = alpha;
  o.beam.early_stopping = es;
  o.beam.num_return_sequences = beams;
  return o;
}

TEST_CASE("beam search with one beam and early stopping equals greedy", "[generation][beam]") {
  for (const char* name : {"stories260K.gguf", "TinyStories-656K-F32.gguf"}) {
    Fixture f(name);
    for (const char* prompt : {"Once upon a time", "Lily and Ben went to the park.", ""}) {
      DecodingOptions greedy;
      greedy.max_new_tokens = 60;
      auto g = f.Run(prompt, greedy);
      DecodingOptions b = Beam(1, 1.0f, EarlyStopping::kEarly, 60);
      b.beam.num_return_sequences = 1;
      auto r = f.Run(prompt, b);
      REQUIRE(g.ok());
      REQUIRE(r.ok());
      CHECK(r->hypotheses[0].ids == g->hypotheses[0].ids);
      CHECK(r->hypotheses[0].text == g->hypotheses[0].text);
      CHECK(r->finish_reason == g->finish_reason);
    }
  }
}

TEST_CASE("beam search gives the same hypotheses with the cache on and off", "[generation][beam]") {
  Fixture f("TinyStories-656K-F32.gguf");
  for (EarlyStopping es :
       {EarlyStopping::kHeuristic, EarlyStopping::kEarly, EarlyStopping::kNever}) {
    DecodingOptions on = Beam(4, 1.0f, es, 30);
    DecodingOptions off = on;
    off.use_cache = false;
    auto a = f.Run("Once upon a time", on);
    auto b = f.Run("Once upon a time", off);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->hypotheses.size() == b->hypotheses.size());
    for (size_t i = 0; i < a->hypotheses.size(); ++i) {
      CHECK(a->hypotheses[i].ids == b->hypotheses[i].ids);
      CHECK(a->hypotheses[i].score == Approx(b->hypotheses[i].score).epsilon(1e-4));
    }
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("beam search invariants on real models", "[generation][beam]") {
  Fixture f("stories260K.gguf");
  for (int beams : {2, 4, 8}) {
    for (float alpha : {0.0f, 1.0f, 2.0f}) {
      for (EarlyStopping es :
           {EarlyStopping::kHeuristic, EarlyStopping::kEarly, EarlyStopping::kNever}) {
        DecodingOptions o = Beam(beams, alpha, es, 48);
        std::vector<int32_t> streamed;
        std::string streamed_text;
        bool prefix_ok = true;
        GenerationResult* final_result = nullptr;
        auto r = f.Run("The little dog was sad because", o, [&](const StreamDelta& d) {
          for (const auto& t : d.tokens) streamed.push_back(t.id);
          streamed_text += d.text;
        });
        REQUIRE(r.ok());
        final_result = &*r;
        const auto& hyps = final_result->hypotheses;
        REQUIRE(static_cast<int>(hyps.size()) == beams);
        // Streamed tokens are exactly the best hypothesis (the tail arrives at the end).
        CHECK(streamed == hyps[0].ids);
        CHECK(streamed_text == hyps[0].text);
        for (size_t i = 0; i < hyps.size(); ++i) {
          const Hypothesis& h = hyps[i];
          double cum = 0;
          for (double lp : h.logprobs) cum += lp;
          CHECK(cum == Approx(h.cum_logprob).margin(1e-9));
          const double len = static_cast<double>(h.ids.size());
          CHECK(h.score == Approx(h.cum_logprob / std::pow(len, alpha)).margin(1e-9));
          if (i > 0) CHECK(hyps[i - 1].score >= hyps[i].score);
          CHECK(static_cast<int>(h.ids.size()) <= o.max_new_tokens);
          const bool ends_eos = !h.ids.empty() && h.ids.back() == f.model->tokenizer().eos_id();
          CHECK((h.finish_reason == FinishReason::kEos) == ends_eos);
        }
        (void)prefix_ok;
      }
    }
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("beam streaming only ever emits a prefix of the final best hypothesis",
          "[generation][beam]") {
  Fixture f("TinyStories-656K-F32.gguf");
  DecodingOptions o = Beam(4, 1.0f, EarlyStopping::kHeuristic, 80);
  o.ignore_eos = true;
  std::vector<std::vector<int32_t>> snapshots;
  std::vector<int32_t> streamed;
  int deltas_before_end = 0;
  auto r = f.Run("Once upon a time", o, [&](const StreamDelta& d) {
    for (const auto& t : d.tokens) streamed.push_back(t.id);
    snapshots.push_back(streamed);
    ++deltas_before_end;
  });
  REQUIRE(r.ok());
  for (const auto& s : snapshots) CHECK(IsPrefix(s, r->hypotheses[0].ids));
  // Streaming is incremental: the certain prefix grows during the search, not only at the end.
  CHECK(deltas_before_end > 5);
}

TEST_CASE("beams share KV blocks", "[generation][beam]") {
  Fixture f("TinyStories-656K-F32.gguf");
  DecodingOptions greedy;
  greedy.max_new_tokens = 200;
  greedy.ignore_eos = true;
  DecodingOptions beam = Beam(4, 1.0f, EarlyStopping::kHeuristic, 200);
  beam.ignore_eos = true;
  auto g = f.Run("Once upon a time", greedy);
  auto b = f.Run("Once upon a time", beam);
  REQUIRE(g.ok());
  REQUIRE(b.ok());
  // Four private caches would need 4x greedy's blocks; shared prefixes keep it far lower.
  CHECK(b->stats.peak_kv_blocks < 2 * g->stats.peak_kv_blocks);
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("seeded sampling is reproducible alone and batched with other requests",
          "[generation][sampling]") {
  Fixture f("stories260K.gguf");
  DecodingOptions o;
  o.method = DecodingMethod::kSample;
  o.max_new_tokens = 50;
  o.sampling.temperature = 0.9f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = 1234;
  auto a = f.Run("Once upon a time", o);
  auto b = f.Run("Once upon a time", o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->hypotheses[0].ids == b->hypotheses[0].ids);
  o.sampling.seed = 99;
  auto c = f.Run("Once upon a time", o);
  REQUIRE(c.ok());
  CHECK(c->hypotheses[0].ids != a->hypotheses[0].ids);

  // The seed-1234 request again, now sharing every forward pass with two other requests.
  o.sampling.seed = 1234;
  DecodingOptions other = o;
  other.sampling.seed = 7;
  DecodingOptions beam = Beam(3, 1.0f, EarlyStopping::kHeuristic, 30);
  CausalLm& m = f.model->lm();
  const Tokenizer& tok = f.model->tokenizer();
  std::vector<std::unique_ptr<Generation>> gens;
  for (auto [prompt, opts] : {std::pair{"Once upon a time", o}, std::pair{"Tom had a ball", other},
                              std::pair{"The cat", beam}}) {
    auto g = Generation::Create(m, tok, *f.cache, f.Prompt(prompt), opts);
    REQUIRE(g.ok());
    gens.push_back(std::move(g).value());
  }
  std::vector<ForwardSeq> seqs;
  std::vector<float> logits;
  for (int step = 0; step < 200; ++step) {
    seqs.clear();
    std::vector<size_t> counts;
    std::vector<Generation*> active;
    for (auto& g : gens) {
      if (g->done()) continue;
      const size_t before = seqs.size();
      REQUIRE(g->PrepareStep(&seqs).ok());
      if (g->done()) continue;
      active.push_back(g.get());
      counts.push_back(seqs.size() - before);
    }
    if (active.empty()) break;
    REQUIRE(m.Forward(*f.cache, absl::MakeSpan(seqs), &logits).ok());
    size_t row = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      REQUIRE(active[i]->ConsumeStep(logits.data() + row * m.config().n_vocab).ok());
      row += counts[i];
    }
  }
  REQUIRE(gens[0]->done());
  GenerationResult batched = gens[0]->TakeResult();
  CHECK(batched.hypotheses[0].ids == a->hypotheses[0].ids);
  gens.clear();
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("stop sequences end generation and are not returned", "[generation][stop]") {
  Fixture f("stories260K.gguf");
  DecodingOptions o;
  o.max_new_tokens = 100;
  auto full = f.Run("Once upon a time", o);
  REQUIRE(full.ok());
  const std::string text = full->hypotheses[0].text;
  const size_t at = text.find("park");
  REQUIRE(at != std::string::npos);
  o.stop = {"zebra", "park"};
  std::string streamed;
  auto r = f.Run("Once upon a time", o, [&](const StreamDelta& d) { streamed += d.text; });
  REQUIRE(r.ok());
  CHECK(r->finish_reason == FinishReason::kStopSequence);
  CHECK(r->hypotheses[0].text == text.substr(0, at));
  CHECK(streamed == r->hypotheses[0].text);
  // Without a match, streamed text equals the final text in full.
  o.stop = {"zebra"};
  streamed.clear();
  auto n = f.Run("Once upon a time", o, [&](const StreamDelta& d) { streamed += d.text; });
  REQUIRE(n.ok());
  CHECK(n->hypotheses[0].text == text);
  CHECK(streamed == text);
  CHECK(n->finish_reason == FinishReason::kLength);
}

TEST_CASE("beam search stops on stop sequences like on EOS", "[generation][beam][stop]") {
  Fixture f("stories260K.gguf");
  const std::string prompt = "Once upon a time";
  DecodingOptions o = Beam(4, 1.0f, EarlyStopping::kHeuristic, 60);
  auto full = f.Run(prompt, o);
  REQUIRE(full.ok());
  const std::string text = full->hypotheses[0].text;
  const std::string word = "mommy";
  const size_t at = text.find(word);
  INFO("unstopped best: " << text);
  REQUIRE(at != std::string::npos);

  o.stop = {"zebra", word};
  std::string streamed;
  std::vector<int32_t> streamed_ids;
  auto r = f.Run(prompt, o, [&](const StreamDelta& d) {
    streamed += d.text;
    for (const auto& t : d.tokens) streamed_ids.push_back(t.id);
  });
  REQUIRE(r.ok());
  const Hypothesis& best = r->hypotheses[0];
  CHECK(r->finish_reason == FinishReason::kStopSequence);
  CHECK(best.finish_reason == FinishReason::kStopSequence);
  CHECK(best.text == text.substr(0, at));
  // The ids keep the token that completed the stop; the text and the stream drop the stop.
  CHECK(f.model->tokenizer().Decode(best.ids).find(word) != std::string::npos);
  CHECK(streamed == best.text);
  CHECK(streamed_ids == best.ids);
  REQUIRE(r->hypotheses.size() == 4);
  for (const Hypothesis& h : r->hypotheses) {
    INFO(h.text);
    CHECK(h.text.find(word) == std::string::npos);
    const std::string raw = f.model->tokenizer().Decode(h.ids);
    if (h.finish_reason == FinishReason::kStopSequence) {
      // Cut right before the stop, which the last token completed.
      CHECK(raw.compare(0, h.text.size() + word.size(), h.text + word) == 0);
      const std::string before =
          f.model->tokenizer().Decode(std::vector<int32_t>(h.ids.begin(), h.ids.end() - 1));
      CHECK(before.find(word) == std::string::npos);
    } else {
      CHECK(raw.find(word) == std::string::npos);
      CHECK(h.text == raw);
    }
    CHECK(h.score == Approx(h.cum_logprob / static_cast<double>(h.ids.size())).margin(1e-9));
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());

  // A stop that never matches changes nothing.
  o.stop = {"zebra"};
  streamed.clear();
  auto n = f.Run(prompt, o, [&](const StreamDelta& d) { streamed += d.text; });
  REQUIRE(n.ok());
  REQUIRE(n->hypotheses.size() == full->hypotheses.size());
  for (size_t i = 0; i < n->hypotheses.size(); ++i) {
    CHECK(n->hypotheses[i].ids == full->hypotheses[i].ids);
    CHECK(n->hypotheses[i].text == full->hypotheses[i].text);
    CHECK(n->hypotheses[i].finish_reason == full->hypotheses[i].finish_reason);
  }
  CHECK(n->finish_reason == full->finish_reason);
  CHECK(streamed == text);
}

TEST_CASE("beam stop sequences: stream equals the best text in every mode",
          "[generation][beam][stop]") {
  Fixture f("stories260K.gguf");
  for (int beams : {2, 4, 8}) {
    for (EarlyStopping es :
         {EarlyStopping::kHeuristic, EarlyStopping::kEarly, EarlyStopping::kNever}) {
      for (const char* stop : {"the", ".", "ed ", "mommy"}) {
        DecodingOptions o = Beam(beams, 1.0f, es, 48);
        o.stop = {stop};
        std::string streamed;
        auto r = f.Run("The little dog was sad because", o,
                       [&](const StreamDelta& d) { streamed += d.text; });
        REQUIRE(r.ok());
        INFO("beams " << beams << " " << EarlyStoppingName(es) << " stop '" << stop << "'");
        CHECK(streamed == r->hypotheses[0].text);
        CHECK(r->finish_reason == r->hypotheses[0].finish_reason);
        for (const Hypothesis& h : r->hypotheses) CHECK(h.text.find(stop) == std::string::npos);
      }
    }
  }
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("top logprobs list the most likely alternatives", "[generation]") {
  Fixture f("TinyStories-656K-F32.gguf");
  DecodingOptions o;
  o.max_new_tokens = 20;
  o.top_logprobs = 5;
  auto r = f.Run("Once upon a time", o);
  REQUIRE(r.ok());
  REQUIRE(r->tokens.size() == 20);
  for (const GeneratedToken& t : r->tokens) {
    REQUIRE(t.top.size() == 5);
    CHECK(t.top[0].id == t.id);  // greedy picks the most likely
    CHECK(t.top[0].logprob == Approx(t.logprob));
    for (size_t i = 1; i < t.top.size(); ++i) CHECK(t.top[i - 1].logprob >= t.top[i].logprob);
  }
}

TEST_CASE("the sliding window generates far past the context in constant memory",
          "[generation][slide]") {
  Fixture f("TinyStories-656K-F32.gguf");  // 512-token context
  DecodingOptions o;
  o.max_new_tokens = 2000;
  o.ignore_eos = true;
  o.context_overflow = ContextOverflow::kSlide;
  o.n_keep = 1;
  auto r = f.Run("Once upon a time", o);
  REQUIRE(r.ok());
  CHECK(r->stats.generated_tokens == 2000);
  CHECK(r->stats.context_shifts > 50);
  CHECK(r->stats.peak_kv_blocks <= 512 / 16 + 1);
  CHECK(r->finish_reason == FinishReason::kLength);
  // Beams slide together.
  DecodingOptions b = Beam(2, 1.0f, EarlyStopping::kHeuristic, 700);
  b.ignore_eos = true;
  b.context_overflow = ContextOverflow::kSlide;
  auto rb = f.Run("Once upon a time", b);
  REQUIRE(rb.ok());
  CHECK(rb->hypotheses[0].ids.size() == 700);
  // Without the cache the window is recomputed; it also runs.
  DecodingOptions off = o;
  off.use_cache = false;
  off.max_new_tokens = 560;
  auto ro = f.Run("Once upon a time", off);
  REQUIRE(ro.ok());
  CHECK(ro->stats.context_shifts > 0);
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

TEST_CASE("a context shift re-rotates cached keys to their new positions", "[generation][slide]") {
  // Layer-0 keys depend only on the token and its position, so after a shift the re-rotated
  // cached keys must equal those of a fresh pass over the kept window, up to float rounding.
  Fixture f("TinyStories-656K-F32.gguf");
  CausalLm& m = f.model->lm();
  const ModelConfig& c = m.config();
  const int n = c.n_ctx;
  const int bs = f.cache->block_size();
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = 3 + (i * 31) % 1500;
  BlockTable slid;
  ForwardSeq fs{tokens, &slid, 0, false};
  std::vector<float> ignored;
  REQUIRE(m.Forward(*f.cache, absl::MakeSpan(&fs, 1), &ignored).ok());
  std::vector<BlockTable*> tables = {&slid};
  REQUIRE(m.ShiftContext(*f.cache, tables, /*keep_blocks=*/1, /*drop_blocks=*/2).ok());
  REQUIRE(slid.num_tokens == n - 2 * bs);

  std::vector<int32_t> window(tokens.begin(), tokens.begin() + bs);
  window.insert(window.end(), tokens.begin() + 3 * bs, tokens.end());
  BlockTable fresh;
  ForwardSeq all{window, &fresh, 0, false};
  REQUIRE(m.Forward(*f.cache, absl::MakeSpan(&all, 1), &ignored).ok());
  REQUIRE(fresh.num_blocks() == slid.num_blocks());
  double max_diff = 0;
  const BlockPool& pool = f.cache->pool();
  for (int b = 0; b < slid.num_blocks(); ++b) {  // all blocks are full: n is a multiple of bs
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const float* a = pool.Key(slid.blocks[b], 0, h);
      const float* e = pool.Key(fresh.blocks[b], 0, h);
      for (int i = 0; i < bs * c.head_dim; ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - e[i])));
      }
    }
  }
  CHECK(max_diff < 1e-4);
  f.cache->Free(slid);
  f.cache->Free(fresh);
}

TEST_CASE("context policy: error names the numbers, stop_at_context_limit finishes cleanly",
          "[generation]") {
  Fixture f("TinyStories-656K-F32.gguf");
  DecodingOptions o;
  o.max_new_tokens = 600;
  auto r = f.Run("Once upon a time", o);
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("512"));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("600"));
  o.stop_at_context_limit = true;
  o.ignore_eos = true;
  auto full = f.Run("Once upon a time", o);
  REQUIRE(full.ok());
  CHECK(full->finish_reason == FinishReason::kContextFull);
  CHECK(full->stats.prompt_tokens + full->stats.generated_tokens == 512);
}

// The beams' log-softmax and penalty run across the compute threads (Generation::ConsumeBeams):
// the result must not depend on the thread count, and the penalty must still apply.
TEST_CASE("beam search with a repetition penalty gives the same beams on 1 and 2 threads",
          "[generation][beam]") {
  Fixture f("stories260K.gguf");
  DecodingOptions o = Beam(4, 1.0f, EarlyStopping::kHeuristic, 40);
  o.ignore_eos = true;
  const int threads = ops::NumThreads();
  auto run = [&](float penalty, int n_threads) {
    ops::SetNumThreads(n_threads);
    o.sampling.repetition_penalty = penalty;
    auto r = f.Run("Once upon a time", o);
    ops::SetNumThreads(threads);
    REQUIRE(r.ok());
    std::vector<std::vector<int32_t>> ids;
    for (const Hypothesis& h : r->hypotheses) ids.push_back(h.ids);
    return ids;
  };
  const auto one = run(1.5f, 1);
  CHECK(run(1.5f, 2) == one);
  CHECK(run(1.0f, 2) != one);
}

TEST_CASE("a cancelled generation stops at the next step and frees its blocks", "[generation]") {
  Fixture f("stories260K.gguf");
  for (DecodingMethod method : {DecodingMethod::kGreedy, DecodingMethod::kBeam}) {
    DecodingOptions o = Beam(4, 1.0f, EarlyStopping::kHeuristic, 200);
    o.method = method;
    o.ignore_eos = true;
    auto g = Generation::Create(f.model->lm(), f.model->tokenizer(), *f.cache,
                                f.Prompt("Once upon a time"), o);
    REQUIRE(g.ok());
    std::vector<ForwardSeq> seqs;
    std::vector<float> logits;
    for (int step = 0; step < 10; ++step) {
      seqs.clear();
      REQUIRE((*g)->PrepareStep(&seqs).ok());
      REQUIRE(f.model->lm().Forward(*f.cache, absl::MakeSpan(seqs), &logits).ok());
      REQUIRE((*g)->ConsumeStep(logits.data()).ok());
    }
    CHECK(f.cache->num_free_blocks() < f.cache->num_total_blocks());
    (*g)->Cancel();
    seqs.clear();
    REQUIRE((*g)->PrepareStep(&seqs).ok());
    REQUIRE((*g)->done());
    CHECK(seqs.empty());
    CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
    GenerationResult r = (*g)->TakeResult();
    CHECK(r.finish_reason == FinishReason::kCancelled);
    CHECK(r.hypotheses.at(0).ids.size() == 10);
  }
}

TEST_CASE("bad decoding options are rejected naming the parameter", "[generation]") {
  Fixture f("stories260K.gguf", 8);
  auto expect = [&](const DecodingOptions& o, const std::string& name) {
    auto r = f.Run("Once upon a time", o);
    INFO(name);
    REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(name));
  };
  DecodingOptions o;
  o = Beam(0, 1.0f, EarlyStopping::kHeuristic);
  expect(o, "num_beams");
  o = Beam(17, 1.0f, EarlyStopping::kHeuristic);
  expect(o, "num_beams");
  o = Beam(4, 1.0f, EarlyStopping::kHeuristic);
  o.beam.num_return_sequences = 5;
  expect(o, "num_return_sequences");
  o = DecodingOptions();
  o.method = DecodingMethod::kSample;
  o.sampling.top_p = 1.5f;
  expect(o, "top_p");
  o.sampling.top_p = 0.0f;
  expect(o, "top_p");
  o = DecodingOptions();
  o.method = DecodingMethod::kSample;
  o.sampling.temperature = -1.0f;
  expect(o, "temperature");
  o = DecodingOptions();
  o.top_logprobs = 21;
  expect(o, "top_logprobs");
  o = DecodingOptions();
  o.max_new_tokens = 0;
  expect(o, "max_new_tokens");
  o = DecodingOptions();
  o.context_overflow = ContextOverflow::kSlide;
  o.n_keep = 5000;
  expect(o, "n_keep");
  CHECK(f.cache->num_free_blocks() == f.cache->num_total_blocks());
}

}  // namespace generation_test
}  // namespace textgen
