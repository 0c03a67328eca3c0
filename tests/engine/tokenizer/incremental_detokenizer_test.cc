#include "engine/tokenizer/incremental_detokenizer.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace textgen {
namespace incremental_detokenizer_test {

using testing::GgufTokenizer;

// Feeds ids one at a time; every piece must be valid UTF-8.
std::string Stream(const Tokenizer& tok, const std::vector<int32_t>& ids,
                   std::vector<std::string>* pieces = nullptr) {
  IncrementalDetokenizer detok(tok);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = detok.Add(id);
    INFO("piece after id " << id);
    REQUIRE(IsValidUtf8(piece));
    REQUIRE(detok.pending_bytes() <= 3);
    if (pieces != nullptr) pieces->push_back(piece);
    all += piece;
  }
  std::string rest = detok.Flush();
  REQUIRE(IsValidUtf8(rest));
  CHECK(detok.pending_bytes() == 0);
  return all + rest;
}

const char kMultiByteText[] =
    "Caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C "
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xE1\x9E\x80\xE1\x9E\xB6 ok";

TEST_CASE("Byte-fallback tokens are held until the character completes",
          "[tokenizer][detokenizer]") {
  const Tokenizer& tok = GgufTokenizer(testing::kSpmVocab);
  // "😀" has no token in the Llama vocab: four <0xXX> byte tokens.
  const std::vector<int32_t> ids = tok.Encode("\xF0\x9F\x98\x80!", false);
  std::vector<std::string> pieces;
  const std::string all = Stream(tok, ids, &pieces);
  CHECK(all == tok.Decode(ids));
  CHECK(all == " \xF0\x9F\x98\x80!");
  // The " " piece comes out, then nothing until the fourth byte arrives.
  REQUIRE(pieces.size() >= 5);
  CHECK(pieces[0] == " ");
  CHECK(pieces[1].empty());
  CHECK(pieces[2].empty());
  CHECK(pieces[3].empty());
  CHECK(pieces[4] == "\xF0\x9F\x98\x80");
}

TEST_CASE("Streamed text concatenates to Decode", "[tokenizer][detokenizer]") {
  for (const char* name :
       {testing::kSpmVocab, testing::kGpt2Vocab, testing::kStories260K, testing::kStories656K}) {
    const Tokenizer& tok = GgufTokenizer(name);
    const std::vector<int32_t> ids = tok.Encode(kMultiByteText, true);
    INFO(name);
    const std::string decoded = tok.Decode(ids);
    if (IsValidUtf8(decoded)) {
      CHECK(Stream(tok, ids) == decoded);
    } else {
      CHECK(Stream(tok, ids) == SanitizeUtf8(decoded));
    }
  }
}

TEST_CASE("GPT-2 tokens that split characters are reassembled", "[tokenizer][detokenizer]") {
  const Tokenizer& tok = GgufTokenizer(testing::kGpt2Vocab);
  // Emoji and CJK frequently split across byte-level tokens.
  const std::vector<int32_t> ids = tok.Encode(kMultiByteText, false);
  bool some_partial = false;
  for (int32_t id : ids) some_partial = some_partial || !IsValidUtf8(tok.TokenBytes(id));
  CHECK(some_partial);  // the test is only meaningful if some tokens are partial characters
  CHECK(Stream(tok, ids) == kMultiByteText);
}

TEST_CASE("Random token sequences stream as valid UTF-8", "[tokenizer][detokenizer]") {
  std::mt19937 rng(3);
  for (const char* name : {testing::kSpmVocab, testing::kGpt2Vocab, testing::kStories260K}) {
    const Tokenizer& tok = GgufTokenizer(name);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<int32_t> ids;
      const int n = 1 + static_cast<int>(rng() % 20);
      for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % tok.vocab_size()));
      const std::string decoded = tok.Decode(ids);
      const std::string streamed = Stream(tok, ids);
      if (IsValidUtf8(decoded)) CHECK(streamed == decoded);
    }
  }
}

TEST_CASE("Flush replaces an incomplete tail and resets", "[tokenizer][detokenizer]") {
  const Tokenizer& tok = GgufTokenizer(testing::kSpmVocab);
  const int32_t e4 = tok.TokenToId("<0xE4>");
  const int32_t bd = tok.TokenToId("<0xBD>");
  const int32_t a = tok.TokenToId("<0x41>");
  REQUIRE((e4 >= 0 && bd >= 0 && a >= 0));
  IncrementalDetokenizer detok(tok);
  CHECK(detok.Add(e4).empty());
  CHECK(detok.Add(bd).empty());
  CHECK(detok.Flush() == "\xEF\xBF\xBD");
  CHECK(detok.pending_bytes() == 0);
  // An ill-formed sequence is replaced as soon as it is known to be ill-formed.
  CHECK(detok.Add(e4).empty());
  CHECK(detok.Add(a) ==
        "\xEF\xBF\xBD"
        "A");
  CHECK(detok.Flush().empty());
}

}  // namespace incremental_detokenizer_test
}  // namespace textgen
