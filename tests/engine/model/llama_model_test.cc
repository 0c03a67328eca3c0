// The forward pass: batching sequences at different positions, logits for every row or none
// (prompt chunks), cache exhaustion and bad tokens, and GGUF vs Hugging Face layouts of the
// same weights.
#include "engine/model/llama_model.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "engine/model/model.h"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace llama_model_test {

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, int num_blocks, int block_size = 16) {
  return testing::MakeTestCache(c, {.num_blocks = num_blocks, .block_size = block_size});
}

double MaxAbsDiff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(double{a[i]} - double{b[i]}));
  return m;
}

std::vector<int32_t> Tokens(int n, int offset) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + offset) % 400;
  return t;
}

TEST_CASE("a batched pass equals separate passes", "[model]") {
  auto model = Model::Load(testing::ModelPath("stories260K.gguf"));
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  const int vocab = m.config().n_vocab;
  // Block size 4 so sequences span several blocks and partial blocks.
  auto cache = MakeCache(m.config(), 64, 4);
  std::vector<int32_t> a = Tokens(11, 0), b = Tokens(6, 5), c = Tokens(9, 9);

  // Alone: a is prefilled then decodes one token; b and c are prefilled.
  std::vector<float> la, lb, lc, l_next;
  BlockTable ta, tb, tc;
  ForwardSeq fa{a, &ta, 0, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fa, 1), &la).ok());
  const int32_t next = 42;
  ForwardSeq fa2{absl::MakeConstSpan(&next, 1), &ta, 11, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fa2, 1), &l_next).ok());
  ForwardSeq fb{b, &tb, 0, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fb, 1), &lb).ok());
  ForwardSeq fc{c, &tc, 0, true};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fc, 1), &lc).ok());
  REQUIRE(lc.size() == c.size() * vocab);

  // Together: a's decode step beside b's and c's prefill, in one pass.
  BlockTable ta2, tb2, tc2;
  ForwardSeq pre{a, &ta2, 0, false};
  std::vector<float> unused;
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&pre, 1), &unused).ok());
  std::vector<ForwardSeq> batch = {
      {absl::MakeConstSpan(&next, 1), &ta2, 11, false}, {b, &tb2, 0, false}, {c, &tc2, 0, true}};
  std::vector<float> lbatch;
  REQUIRE(m.Forward(*cache, absl::MakeSpan(batch), &lbatch).ok());
  REQUIRE(lbatch.size() == (2 + c.size()) * vocab);
  CHECK(MaxAbsDiff(lbatch.data(), l_next.data(), vocab) < 1e-4);
  CHECK(MaxAbsDiff(lbatch.data() + vocab, lb.data(), vocab) < 1e-4);
  CHECK(MaxAbsDiff(lbatch.data() + 2 * vocab, lc.data(), c.size() * vocab) < 1e-4);
  CHECK(ta2.num_tokens == 12);
  CHECK(tc2.num_tokens == 9);

  // all_logits rows equal feeding the tokens one at a time.
  BlockTable t1;
  for (size_t i = 0; i < c.size(); ++i) {
    ForwardSeq one{absl::MakeConstSpan(&c[i], 1), &t1, static_cast<int32_t>(i), false};
    std::vector<float> li;
    REQUIRE(m.Forward(*cache, absl::MakeSpan(&one, 1), &li).ok());
    CHECK(MaxAbsDiff(li.data(), lc.data() + i * vocab, vocab) < 1e-4);
  }
  for (BlockTable* t : {&ta, &tb, &tc, &ta2, &tb2, &tc2, &t1}) cache->Free(*t);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("sequences without logits get no row, and a prompt run in chunks equals it whole",
          "[model]") {
  auto model = Model::Load(testing::ModelPath("stories260K.gguf"));
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  const int vocab = m.config().n_vocab;
  auto cache = MakeCache(m.config(), 64, 4);
  std::vector<int32_t> a = Tokens(23, 3), b = Tokens(7, 8);

  // Whole: a's last row, b's rows.
  BlockTable ta, tb;
  std::vector<float> la, lb;
  ForwardSeq fa{a, &ta, 0, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fa, 1), &la).ok());
  ForwardSeq fb{b, &tb, 0, true};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&fb, 1), &lb).ok());

  // a in chunks of 10, 10 and 3 beside b: only the chunk that ends a has a row.
  BlockTable ta2, tb2;
  const auto chunk = [&](int from, int n) { return absl::MakeConstSpan(a).subspan(from, n); };
  ForwardSeq first{chunk(0, 10), &ta2, 0, false};
  first.logits = false;
  std::vector<float> logits = {1.0f};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&first, 1), &logits).ok());
  CHECK(logits.empty());
  CHECK(ta2.num_tokens == 10);  // its K/V are in the cache all the same
  std::vector<ForwardSeq> batch = {{b, &tb2, 0, true}, {chunk(10, 10), &ta2, 10, false}};
  batch[1].logits = false;
  REQUIRE(m.Forward(*cache, absl::MakeSpan(batch), &logits).ok());
  REQUIRE(logits.size() == b.size() * vocab);  // b's rows only
  CHECK(MaxAbsDiff(logits.data(), lb.data(), b.size() * vocab) < 1e-4);
  ForwardSeq last{chunk(20, 3), &ta2, 20, false};
  REQUIRE(m.Forward(*cache, absl::MakeSpan(&last, 1), &logits).ok());
  REQUIRE(logits.size() == static_cast<size_t>(vocab));
  CHECK(MaxAbsDiff(logits.data(), la.data(), vocab) < 1e-4);
  CHECK(ta2.num_tokens == 23);
  for (BlockTable* t : {&ta, &tb, &ta2, &tb2}) cache->Free(*t);
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

TEST_CASE("a pass that does not fit the pool fails cleanly", "[model]") {
  auto model = Model::Load(testing::ModelPath("stories260K.gguf"));
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config(), 3, 16);  // 48 token slots
  std::vector<int32_t> a = Tokens(30, 0), b = Tokens(30, 1);
  BlockTable ta, tb;
  std::vector<ForwardSeq> batch = {{a, &ta, 0, false}, {b, &tb, 0, false}};
  std::vector<float> logits;
  absl::Status st = m.Forward(*cache, absl::MakeSpan(batch), &logits);
  REQUIRE(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(st.message()), Catch::Contains("needs 4 blocks"));
  CHECK(ta.num_tokens == 0);
  CHECK(tb.num_tokens == 0);
  CHECK(cache->num_free_blocks() == 3);
  // One of them alone fits.
  REQUIRE(m.Forward(*cache, absl::MakeSpan(batch.data(), 1), &logits).ok());
  cache->Free(ta);
}

TEST_CASE("token ids outside the vocabulary are rejected before any work", "[model]") {
  auto model = Model::Load(testing::ModelPath("stories260K.gguf"));
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config(), 4);
  for (int32_t bad : {-1, 512, 1 << 30}) {
    std::vector<int32_t> t = {1, bad};
    BlockTable table;
    ForwardSeq fs{t, &table, 0, false};
    std::vector<float> logits;
    absl::Status st = m.Forward(*cache, absl::MakeSpan(&fs, 1), &logits);
    REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(std::to_string(bad)));
    CHECK(table.num_tokens == 0);
  }
  CHECK(cache->num_free_blocks() == 4);
}

TEST_CASE("GGUF and Hugging Face layouts of one model give the same logits", "[model]") {
  auto gguf = Model::Load(testing::ModelPath("TinyStories-656K-F32.gguf"));
  auto hf = Model::Load(testing::ModelPath("tinystories-656k-hf"));
  REQUIRE(gguf.ok());
  REQUIRE(hf.ok());
  std::vector<int32_t> t = Tokens(40, 3);
  std::vector<float> lg, lh;
  for (auto* m : {&gguf, &hf}) {
    auto cache = MakeCache((**m)->config(), 8);
    BlockTable table;
    ForwardSeq fs{t, &table, 0, true};
    REQUIRE((**m)->lm().Forward(*cache, absl::MakeSpan(&fs, 1), m == &gguf ? &lg : &lh).ok());
    cache->Free(table);
  }
  REQUIRE(lg.size() == lh.size());
  CHECK(MaxAbsDiff(lg.data(), lh.data(), lg.size()) < 1e-5);
}

}  // namespace llama_model_test
}  // namespace textgen
