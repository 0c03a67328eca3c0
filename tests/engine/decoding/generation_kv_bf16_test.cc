// Generation over a BF16 KV cache (KvType::kBf16): greedy decoding stays on the F32 cache's
// path on the reference prompts up to near ties, the text is well formed, and the sliding
// window (which re-rotates BF16 keys) runs past the context.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/format/dtype.h"
#include "engine/model/model.h"
#include "engine/tokenizer/unicode.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace generation_kv_bf16_test {

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, KvType type, int num_blocks) {
  return testing::MakeTestCache(c, {.type = type, .num_blocks = num_blocks});
}

std::unique_ptr<Model> LoadModel(const std::string& name) {
  auto m = Model::Load(testing::ModelPath(name));  // F32 matmuls: only the cache differs
  REQUIRE(m.ok());
  return std::move(m).value();
}

// Top-2 logprob gap (nats) below which BF16 K/V may flip a greedy choice: a few times the
// ~1e-2 they move a logprob.
constexpr double kNearTie = 0.1;

// Tokens two id lists share from the start.
size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first -
         a.begin();
}

TEST_CASE("greedy decoding with a BF16 KV cache follows the F32 cache on the reference prompts",
          "[generation][kv_bf16]") {
  struct Case {
    const char* model;
    const char* reference;
  };
  const Case cases[] = {{"stories260K.gguf", "stories260K.greedy.json"},
                        {"TinyStories-656K-F32.gguf", "TinyStories-656K-F32.greedy.json"}};
  for (const Case& c : cases) {
    auto model = LoadModel(c.model);
    const ModelConfig& config = model->config();
    const int blocks = config.n_ctx / 16 + 2;
    auto f32 = MakeCache(config, KvType::kF32, blocks);
    auto bf16 = MakeCache(config, KvType::kBf16, blocks);
    nlohmann::json ref =
        nlohmann::json::parse(testing::ReadFile(testing::ReferenceDir() + "/" + c.reference));
    size_t shortest = SIZE_MAX, total = 0, agreed = 0;
    for (const auto& rc : ref["cases"]) {
      const std::vector<int32_t> prompt = rc["prompt_ids"].get<std::vector<int32_t>>();
      INFO(c.model << ", prompt '" << rc["prompt"].get<std::string>() << "'");
      DecodingOptions o;
      o.max_new_tokens = ref["n_predict"].get<int>();
      o.top_logprobs = 2;
      auto a = Generate(model->lm(), model->tokenizer(), *f32, prompt, o);
      auto b = Generate(model->lm(), model->tokenizer(), *bf16, prompt, o);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      const Hypothesis& ha = a->hypotheses.at(0);
      const Hypothesis& hb = b->hypotheses.at(0);
      // The F32 cache is the parity path: it still reproduces the reference.
      CHECK(ha.ids == rc["generated_ids"].get<std::vector<int32_t>>());
      // BF16 K/V move the logprobs by ~1e-2 nats, so greedy may part ways only where the F32
      // run's best two tokens were about that close: a near tie, not a broken cache.
      const size_t common = CommonPrefix(ha.ids, hb.ids);
      if (common < ha.ids.size()) {
        const auto& top = a->tokens.at(common).top;
        REQUIRE(top.size() == 2);
        INFO("diverged after " << common << " tokens; F32 top-2 gap there "
                               << top[0].logprob - top[1].logprob);
        CHECK(top[0].logprob - top[1].logprob < kNearTie);
      } else {
        CHECK(a->finish_reason == b->finish_reason);
      }
      // Well-formed output: ids in the vocabulary, finite logprobs, valid UTF-8 text that
      // starts with the F32 run's text up to where the ids diverge.
      REQUIRE(!hb.ids.empty());
      for (int32_t id : hb.ids) CHECK((id >= 0 && id < config.n_vocab));
      for (double lp : hb.logprobs) CHECK((std::isfinite(lp) && lp <= 0));
      CHECK(IsValidUtf8(hb.text));
      const std::vector<int32_t> head(hb.ids.begin(), hb.ids.begin() + common);
      CHECK_THAT(hb.text, Catch::StartsWith(SanitizeUtf8(model->tokenizer().Decode(head))));
      // The chosen tokens' probabilities barely move where the runs agree.
      for (size_t i = 0; i < common; ++i) CHECK(std::abs(ha.logprobs[i] - hb.logprobs[i]) < 0.05);
      shortest = std::min(shortest, common);
      total += ha.ids.size();
      agreed += common;
    }
    CHECK(f32->num_free_blocks() == f32->num_total_blocks());
    CHECK(bf16->num_free_blocks() == bf16->num_total_blocks());
    // Near ties are rare: most of the tokens still agree.
    CHECK(agreed >= total * 8 / 10);
    WARN(c.model << ": BF16 KV agrees with F32 KV on " << agreed << " of " << total
                 << " greedy tokens (shortest common prefix " << shortest << ")");
  }
}

TEST_CASE("the sliding window runs past the context on a BF16 KV cache",
          "[generation][kv_bf16][slide]") {
  auto model = LoadModel("TinyStories-656K-F32.gguf");  // 512-token context
  auto cache = MakeCache(model->config(), KvType::kBf16, 600);
  DecodingOptions o;
  o.max_new_tokens = 1200;
  o.ignore_eos = true;
  o.context_overflow = ContextOverflow::kSlide;
  o.n_keep = 1;
  auto r = Generate(model->lm(), model->tokenizer(), *cache,
                    model->tokenizer().Encode("Once upon a time", true), o);
  REQUIRE(r.ok());
  CHECK(r->stats.generated_tokens == 1200);
  CHECK(r->stats.context_shifts > 20);
  CHECK(r->stats.peak_kv_blocks <= 512 / 16 + 1);
  CHECK(r->finish_reason == FinishReason::kLength);
  const Hypothesis& h = r->hypotheses.at(0);
  CHECK(IsValidUtf8(h.text));
  for (double lp : h.logprobs) CHECK(std::isfinite(lp));
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("a context shift re-rotates BF16 cached keys to their new positions",
          "[generation][kv_bf16][slide]") {
  // As the F32 test in generation_test.cc: layer-0 keys depend only on the token and its
  // position, so the re-rotated keys must equal a fresh pass's, here up to BF16 rounding:
  // the fresh keys are rounded once, the shifted ones when stored and again after rotating.
  auto model = LoadModel("TinyStories-656K-F32.gguf");
  CausalLm& m = model->lm();
  const ModelConfig& c = m.config();
  auto cache = MakeCache(c, KvType::kBf16, 80);
  const int n = c.n_ctx;
  const int bs = cache->block_size();
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = 3 + (i * 31) % 1500;
  BlockTable slid;
  ForwardSeq fs{tokens, &slid, 0, false};
  std::vector<float> ignored;
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fs, 1), &ignored).ok());
  std::vector<BlockTable*> tables = {&slid};
  REQUIRE(m.ShiftContext(*cache, tables, /*keep_blocks=*/1, /*drop_blocks=*/2).ok());

  std::vector<int32_t> window(tokens.begin(), tokens.begin() + bs);
  window.insert(window.end(), tokens.begin() + 3 * bs, tokens.end());
  BlockTable fresh;
  ForwardSeq all{window, &fresh, 0, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&all, 1), &ignored).ok());
  REQUIRE(fresh.num_blocks() == slid.num_blocks());
  // A rotation mixes dims 2i and 2i + 1, so rounding errors scale with the pair's norm, not
  // with each element (one may be near 0 while its partner is large).
  const BlockPool& pool = cache->pool();
  double max_rel = 0;
  for (int b = 0; b < slid.num_blocks(); ++b) {  // all blocks are full: n is a multiple of bs
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const uint16_t* a = pool.KeyBf16(slid.blocks[b], 0, h);  // K^T [head_dim, bs]
      const uint16_t* e = pool.KeyBf16(fresh.blocks[b], 0, h);
      for (int d = 0; d < c.head_dim; d += 2) {
        for (int r = 0; r < bs; ++r) {
          const double e0 = BF16ToF32(e[d * bs + r]), e1 = BF16ToF32(e[(d + 1) * bs + r]);
          const double a0 = BF16ToF32(a[d * bs + r]), a1 = BF16ToF32(a[(d + 1) * bs + r]);
          const double norm = std::max(std::hypot(e0, e1), 1e-3);
          max_rel = std::max({max_rel, std::abs(a0 - e0) / norm, std::abs(a1 - e1) / norm});
        }
      }
    }
  }
  INFO("max difference relative to the pair's norm " << max_rel);
  // Three BF16 roundings of at most 2^-8 relative each (one of them rotated): <= ~3.4 * 2^-8.
  CHECK(max_rel < 1.0 / 64);
  cache->Free(slid);
  cache->Free(fresh);
}

}  // namespace generation_kv_bf16_test
}  // namespace textgen
