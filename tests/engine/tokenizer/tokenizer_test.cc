// Tokenizer behaviour on small synthetic vocabs, where each rule can be seen in isolation.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

namespace textgen {
namespace tokenizer_test {

using Ids = std::vector<int32_t>;

// <unk>, <s>, </s>, then `extra` normal tokens with their scores, then byte tokens if asked.
VocabData SpmVocab(const std::vector<std::pair<std::string, float>>& extra, bool bytes) {
  VocabData v;
  v.model = VocabModel::kLlama;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.scores = {0, 0, 0};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (const auto& [text, score] : extra) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(TokenType::kNormal);
  }
  if (bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      v.tokens.push_back(name);
      v.scores.push_back(0);
      v.types.push_back(TokenType::kByte);
    }
  }
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

std::unique_ptr<Tokenizer> Make(VocabData v) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(std::move(v));
  REQUIRE(t.ok());
  return *std::move(t);
}

const char kSp[] = "\xE2\x96\x81";  // ▁

TEST_CASE("SPM merges the best-scoring pair first, leftmost on ties", "[tokenizer][spm]") {
  // ids: 3 ▁, 4 a, 5 b, 6 c, 7 ab, 8 bc
  auto by_score = Make(SpmVocab({{kSp, 0}, {"a", 0}, {"b", 0}, {"c", 0}, {"ab", 1}, {"bc", 2}},
                                /*bytes=*/false));
  CHECK(by_score->Encode("abc", false) == Ids{3, 4, 8});
  auto tie = Make(SpmVocab({{kSp, 0}, {"a", 0}, {"b", 0}, {"c", 0}, {"ab", 1}, {"bc", 1}},
                           /*bytes=*/false));
  CHECK(tie->Encode("abc", false) == Ids{3, 7, 6});
  CHECK(tie->Encode("abc", true) == Ids{1, 3, 7, 6});
  CHECK(tie->Encode("", true) == Ids{1});
  CHECK(tie->Encode("", false).empty());
}

TEST_CASE("SPM byte fallback, or UNK without byte tokens", "[tokenizer][spm]") {
  auto with_bytes = Make(SpmVocab({{kSp, 0}, {"a", 0}}, /*bytes=*/true));
  const int32_t byte0 = 5;  // <0x00>
  CHECK(with_bytes->Encode("a\xC3\xA9", false) == Ids{3, 4, byte0 + 0xC3, byte0 + 0xA9});
  CHECK(with_bytes->Decode(with_bytes->Encode("a\xC3\xA9", false)) == " a\xC3\xA9");
  auto no_bytes = Make(SpmVocab({{kSp, 0}, {"a", 0}}, /*bytes=*/false));
  CHECK(no_bytes->Encode("a\xC3\xA9"
                         "a",
                         false) == Ids{3, 4, 0, 4});
  CHECK(no_bytes->Encode("\xFF\xFE", false) == Ids{3, 0, 0});
}

TEST_CASE("Special tokens: parsed only on request, never assembled", "[tokenizer][spm]") {
  // Pieces that could spell "<s>" by merging: "<", "s", ">", "<s".
  auto tok = Make(SpmVocab({{kSp, 0}, {"<", 0}, {"s", 0}, {">", 0}, {"<s", 5}, {"x", 0}},
                           /*bytes=*/false));
  const Ids plain = tok->Encode("<s>", false);
  CHECK(std::find(plain.begin(), plain.end(), 1) == plain.end());
  CHECK(plain == Ids{3, 7, 6});
  // Parsed: a space prefix is added to the text after a special token, as llama.cpp does.
  CHECK(tok->Encode("x<s>x", false, true) == Ids{3, 8, 1, 3, 8});
  CHECK(tok->Encode("<s>", false, true) == Ids{1});
}

TEST_CASE("TokenBytes renders each token type", "[tokenizer][spm]") {
  VocabData v = SpmVocab({{std::string(kSp) + "hi", 0}, {"[[x]]", 0}}, /*bytes=*/true);
  v.types[4] = TokenType::kUserDefined;
  auto tok = Make(std::move(v));
  CHECK(tok->TokenBytes(0).empty());  // unknown
  CHECK(tok->TokenBytes(1).empty());  // control
  CHECK(tok->TokenBytes(3) == " hi");
  CHECK(tok->TokenBytes(4) == "[[x]]");
  CHECK(tok->TokenBytes(5 + '\n') == "\n");
  CHECK(tok->TokenText(5 + '\n') == "<0x0A>");
  CHECK(tok->IsControl(1));
  CHECK_FALSE(tok->IsControl(3));
  // User-defined tokens are matched as units even without parse_special.
  CHECK(tok->Encode("[[x]]", false) == Ids{4});
}

TEST_CASE("Create rejects inconsistent vocabs", "[tokenizer]") {
  CHECK_FALSE(Tokenizer::Create(VocabData{}).ok());
  VocabData v = SpmVocab({{"a", 0}}, false);
  v.scores.pop_back();
  CHECK_FALSE(Tokenizer::Create(v).ok());
  v = SpmVocab({{"a", 0}}, false);
  v.types.push_back(TokenType::kNormal);
  CHECK_FALSE(Tokenizer::Create(v).ok());
  v = SpmVocab({{"a", 0}}, false);
  v.bos_id = 99;
  CHECK_FALSE(Tokenizer::Create(v).ok());
  v = SpmVocab({{"a", 0}}, false);
  v.eos_id = -2;
  CHECK_FALSE(Tokenizer::Create(v).ok());
}

TEST_CASE("GPT-2 BPE applies merges by rank", "[tokenizer][bpe]") {
  VocabData v;
  v.model = VocabModel::kGpt2;
  // Byte-level characters for 'a', 'b', 'c' are themselves; space is 'Ġ' (U+0120).
  v.tokens = {"a",
              "b",
              "c",
              "ab",
              "bc",
              "abc",
              "\xC4\xA0",
              "\xC4\xA0"
              "a"};
  v.merges = {"b c", "a b", "a bc", "\xC4\xA0 a"};
  auto tok = Make(std::move(v));
  CHECK(tok->Encode("abc", false) == Ids{5});  // "b c" first, then "a bc"
  CHECK(tok->Encode("ab", false) == Ids{3});
  CHECK(tok->Encode("ab a", false) == Ids{3, 7});
  CHECK(tok->Decode({3, 7}) == "ab a");
  // Bytes without a token are dropped (no unk in this vocab) rather than crashing.
  CHECK(tok->Encode("ax", false) == Ids{0});
}

}  // namespace tokenizer_test
}  // namespace textgen
