// DraftModel: a draft model loads beside the target only with the target's vocabulary, and
// every refusal names the file and the difference.
#include "engine/scheduler/draft_model.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/test_util.h"

namespace textgen {
namespace draft_model_test {

std::unique_ptr<Model> LoadTarget(const std::string& name) {
  auto m = Model::Load(testing::ModelPath(name));
  REQUIRE(m.ok());
  return std::move(m).value();
}

TEST_CASE("a draft model with the target's vocabulary loads with its own pool",
          "[scheduler][speculative]") {
  auto target = LoadTarget("TinyStories-656K-F32.gguf");
  auto d = DraftModel::Load(testing::ModelPath("TinyStories-656K-Q8_0.gguf"), {}, *target,
                            KvType::kF32, 16);
  REQUIRE(d.ok());
  CHECK((*d)->model->config().n_vocab == target->config().n_vocab);
  CHECK((*d)->cache->num_total_blocks() > 0);
  CHECK((*d)->cache->num_free_blocks() == (*d)->cache->num_total_blocks());
}

TEST_CASE("a draft model of another vocabulary is refused naming the file",
          "[scheduler][speculative]") {
  auto target = LoadTarget("TinyStories-656K-F32.gguf");
  const std::string path = testing::ModelPath("stories260K.gguf");
  auto d = DraftModel::Load(path, {}, *target, KvType::kF32, 16);
  REQUIRE(d.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(d.status().message());
  CHECK_THAT(msg, Catch::Contains(path));
  CHECK_THAT(msg, Catch::Contains("512 tokens, the target's 2048"));

  auto missing = DraftModel::Load("/nonexistent/draft.gguf", {}, *target, KvType::kF32, 16);
  REQUIRE(!missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("/nonexistent/draft.gguf"));
}

TEST_CASE("vocabularies differing in one token text or in output rows are told apart",
          "[scheduler][speculative]") {
  auto target = LoadTarget("TinyStories-656K-F32.gguf");
  const Tokenizer& tok = target->tokenizer();
  const int n_vocab = target->config().n_vocab;
  CHECK(CheckDraftVocabulary(tok, n_vocab, tok, n_vocab).ok());

  VocabData changed = tok.vocab();
  const int32_t id = 700;
  changed.tokens[id] += "x";
  auto other = Tokenizer::Create(changed);
  REQUIRE(other.ok());
  absl::Status st = CheckDraftVocabulary(tok, n_vocab, **other, n_vocab);
  REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("token 700 is"));

  st = CheckDraftVocabulary(tok, n_vocab, tok, n_vocab + 64);
  REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("more than the target's"));
}

}  // namespace draft_model_test
}  // namespace textgen
