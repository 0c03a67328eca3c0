// ModelDrafter: with the target itself as the draft model its drafts are the target's greedy
// continuation, also after the target rejected part of a draft (the drafter rolls its cache
// back to what the new text shares); it never leaks a block, and a full draft pool or a full
// context means no draft rather than a failed request.
#include "engine/decoding/model_drafter.h"

#include <catch2/catch.hpp>
#include <vector>

#include "engine/decoding/generation.h"
#include "tests/engine/decoding/generation_test_util.h"

namespace textgen {
namespace model_drafter_test {

using testing::ModelWithCache;

// `prompt` followed by the first `n` of `ids`.
std::vector<int32_t> Text(const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids,
                          size_t n) {
  std::vector<int32_t> t = prompt;
  t.insert(t.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  return t;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& ids, size_t from, size_t n) {
  return std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(from),
                              ids.begin() + static_cast<std::ptrdiff_t>(from + n));
}

TEST_CASE("the target as its own draft model drafts its greedy continuation",
          "[decoding][speculative]") {
  ModelWithCache target("stories260K.gguf");
  ModelWithCache draft("stories260K.gguf", 64);
  const std::vector<int32_t> prompt = target.model->tokenizer().Encode("Once upon a time", true);
  DecodingOptions greedy;
  greedy.max_new_tokens = 40;
  greedy.ignore_eos = true;
  auto reference =
      Generate(target.model->lm(), target.model->tokenizer(), *target.cache, prompt, greedy);
  REQUIRE(reference.ok());
  const std::vector<int32_t>& gen = reference->hypotheses[0].ids;
  REQUIRE(gen.size() == 40);

  const int free_before = draft.cache->num_free_blocks();
  {
    ModelDrafter drafter(draft.model->lm(), *draft.cache);
    std::vector<int32_t> out;
    REQUIRE(drafter.Propose(prompt, 8, &out).ok());
    CHECK(out == Slice(gen, 0, 8));
    // It holds the text and every draft but the last.
    CHECK(drafter.computed_tokens() == static_cast<int>(prompt.size()) + 7);

    // The target kept 3 drafts and chose the 4th itself: the text grew by 4.
    REQUIRE(drafter.Propose(Text(prompt, gen, 4), 8, &out).ok());
    CHECK(out == Slice(gen, 4, 8));
    // All 8 kept plus the target's next token: two new tokens to feed.
    REQUIRE(drafter.Propose(Text(prompt, gen, 13), 5, &out).ok());
    CHECK(out == Slice(gen, 13, 5));

    // A text the drafter never saw (the target chose a token the draft did not): the drafts
    // are what a fresh drafter gives for it.
    std::vector<int32_t> other = Text(prompt, gen, 15);
    other.push_back((gen[15] + 1) % draft.model->config().n_vocab);
    REQUIRE(drafter.Propose(other, 6, &out).ok());
    ModelDrafter fresh(draft.model->lm(), *draft.cache);
    std::vector<int32_t> fresh_out;
    REQUIRE(fresh.Propose(other, 6, &fresh_out).ok());
    CHECK(out == fresh_out);
    CHECK(out.size() == 6);
  }
  CHECK(draft.cache->num_free_blocks() == free_before);
}

TEST_CASE("no draft for an empty text, no tokens, or a text at the context's end",
          "[decoding][speculative]") {
  ModelWithCache draft("stories260K.gguf");
  ModelDrafter drafter(draft.model->lm(), *draft.cache);
  std::vector<int32_t> out = {1, 2};
  REQUIRE(drafter.Propose({}, 4, &out).ok());
  CHECK(out.empty());
  const std::vector<int32_t> text = {1, 100, 200};
  REQUIRE(drafter.Propose(text, 0, &out).ok());
  CHECK(out.empty());
  const int n_ctx = draft.model->config().n_ctx;
  std::vector<int32_t> long_text(static_cast<size_t>(n_ctx - 3), 100);
  long_text[0] = 1;
  REQUIRE(drafter.Propose(long_text, 4, &out).ok());  // 4 drafts would pass the context
  CHECK(out.empty());
  absl::Status st = drafter.Propose(long_text, 3, &out);
  INFO(st.ToString());
  REQUIRE(st.ok());
  CHECK(out.size() == 3);
}

TEST_CASE("a full draft pool means no draft and no blocks held", "[decoding][speculative]") {
  ModelWithCache draft("stories260K.gguf", 2);  // 32 tokens
  ModelDrafter drafter(draft.model->lm(), *draft.cache);
  std::vector<int32_t> text(40, 100);
  text[0] = 1;
  std::vector<int32_t> out = {7};
  absl::Status st = drafter.Propose(text, 4, &out);
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK(out.empty());
  CHECK(drafter.computed_tokens() == 0);
  CHECK(draft.cache->num_free_blocks() == 2);
  // A shorter text fits again.
  text.resize(20);
  REQUIRE(drafter.Propose(text, 4, &out).ok());
  CHECK(out.size() == 4);
}

}  // namespace model_drafter_test
}  // namespace textgen
