// StreamAssembler on a toy vocabulary: deltas carry whole characters, stop strings are cut and
// their possible beginnings held back until Finish, and the concatenated deltas equal
// AnswerText cut at its stop for any chunking of the same tokens.
#include "engine/decoding/stream_assembler.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/engine/decoding/toy_vocab_test_util.h"

namespace textgen {
namespace stream_assembler_test {

using namespace toy_vocab;  // NOLINT: the toy ids

std::vector<GeneratedToken> Tokens(std::vector<int32_t> ids) {
  std::vector<GeneratedToken> out;
  for (int32_t id : ids) out.push_back(GeneratedToken{id, "unset", -0.5, {}});
  return out;
}

// Records every delta the sink receives.
struct Recorder {
  std::vector<StreamDelta> deltas;
  StreamSink Sink() {
    return [this](const StreamDelta& d) { deltas.push_back(d); };
  }
  std::string Text() const {
    std::string t;
    for (const StreamDelta& d : deltas) t += d.text;
    return t;
  }
};

TEST_CASE("stream assembler: one delta per commit, whole characters only", "[stream_assembler]") {
  Recorder r;
  StreamAssembler s(ToyTokenizer(), {}, {}, r.Sink());
  s.Commit(Tokens({kA}));
  s.Commit(Tokens({kE1}));  // half of "é": no text yet
  s.Commit(Tokens({kE2, kB}));
  s.Commit({});  // nothing to send
  s.Finish({});  // nothing held back: no last delta
  REQUIRE(r.deltas.size() == 3);
  CHECK(r.deltas[0].text == "a");
  CHECK(r.deltas[1].text.empty());
  REQUIRE(r.deltas[1].tokens.size() == 1);
  CHECK(r.deltas[1].tokens[0].text.empty());
  CHECK(r.deltas[2].text ==
        "\xC3\xA9"
        "b");
  REQUIRE(r.deltas[2].tokens.size() == 2);
  CHECK(r.deltas[2].tokens[0].text == "\xC3\xA9");
  CHECK(r.deltas[2].tokens[1].text == "b");
  CHECK(r.deltas[2].tokens[1].logprob == -0.5);
  CHECK(s.text() ==
        "a\xC3\xA9"
        "b");
  CHECK(s.num_tokens() == 4);
  CHECK(s.TakeTokens().size() == 4);
}

TEST_CASE("stream assembler: a stop string is cut and never shown", "[stream_assembler]") {
  Recorder r;
  StreamAssembler s(ToyTokenizer(), {}, {"bc"}, r.Sink());
  s.Commit(Tokens({kA}));
  CHECK(r.deltas.back().text == "a");
  s.Commit(Tokens({kB}));  // "b" may begin "bc": held back
  CHECK(r.deltas.back().text.empty());
  CHECK_FALSE(s.stopped());
  s.Commit(Tokens({kC}));
  CHECK(s.stopped());
  CHECK(r.deltas.back().text.empty());
  // Tokens committed after the stop (a beam's certain prefix) still come, without text.
  s.Commit(Tokens({kD}));
  CHECK(r.deltas.back().tokens.size() == 1);
  CHECK(r.deltas.back().text.empty());
  s.Finish(Tokens({kA}));
  CHECK(r.deltas.back().text.empty());
  CHECK(r.Text() == "a");
  CHECK(s.text() == "a");
  CHECK(s.num_tokens() == 5);
}

TEST_CASE("stream assembler: held-back text comes with Finish when no stop completes",
          "[stream_assembler]") {
  Recorder r;
  StreamAssembler s(ToyTokenizer(), {}, {"bcd", "", "zz"}, r.Sink());
  s.Commit(Tokens({kA, kBC}));  // "abc": "bc" may still become "bcd"
  CHECK(r.deltas.back().text == "a");
  s.Commit(Tokens({kE1}));  // an incomplete character adds nothing yet
  CHECK(r.deltas.back().text.empty());
  s.Finish({});  // the dangling byte becomes U+FFFD; "bc" is released
  CHECK(r.deltas.back().text == "bc\xEF\xBF\xBD");
  CHECK_FALSE(s.stopped());
  CHECK(s.text() == "abc\xEF\xBF\xBD");
}

TEST_CASE("stream assembler: control tokens show text only when asked", "[stream_assembler]") {
  Recorder plain;
  StreamAssembler a(ToyTokenizer(), {}, {}, plain.Sink());
  a.Commit(Tokens({kA, kCall, kB}));
  a.Finish({});
  CHECK(a.text() == "ab");
  Recorder shown;
  StreamAssembler b(ToyTokenizer(), {kCall}, {"<|call|>"}, shown.Sink());
  b.Commit(Tokens({kA, kCall, kB}));
  b.Finish({});
  CHECK(b.stopped());  // the shown control text can complete a stop string
  CHECK(b.text() == "a");
}

TEST_CASE("AnswerText says where the first stop string to complete begins", "[stream_assembler]") {
  const Tokenizer& tok = ToyTokenizer();
  size_t at = 0;
  CHECK(AnswerText(tok, {}, {"cd", "bc"}, {kA, kB, kC, kD}, &at) == "abcd");
  CHECK(at == 1);  // "bc" ends first
  CHECK(AnswerText(tok, {}, {"x"}, {kA, kB}, &at) == "ab");
  CHECK(at == std::string::npos);
  CHECK(AnswerText(tok, {kCall}, {}, {kCall, kA}) == "<|call|>a");
  CHECK(AnswerText(tok, {}, {}, {kCall, kA}) == "a");
}

TEST_CASE("stream assembler: any chunking shows AnswerText cut at its stop", "[stream_assembler]") {
  const std::vector<int32_t> pieces = {kA, kB, kC, kD, kBC, kE1, kE2, kSpace, kCall};
  const std::vector<std::vector<std::string>> stop_sets = {
      {}, {"bc"}, {"cd", "d "}, {"\xC3\xA9"}, {"ab", "bcb", "<|call|>"}};
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(rng() % 12);
    for (int32_t& id : ids) id = pieces[rng() % pieces.size()];
    const std::vector<std::string>& stops = stop_sets[seed % stop_sets.size()];
    const std::vector<int32_t> shown =
        seed % 2 ? std::vector<int32_t>{kCall} : std::vector<int32_t>{};
    Recorder r;
    StreamAssembler s(ToyTokenizer(), shown, stops, r.Sink());
    size_t i = 0;
    while (i < ids.size()) {
      const size_t n = std::min<size_t>(ids.size() - i, rng() % 4);
      s.Commit(Tokens(std::vector<int32_t>(ids.begin() + i, ids.begin() + i + n)));
      i += n;
      if (rng() % 5 == 0) break;  // the rest comes with Finish
    }
    s.Finish(Tokens(std::vector<int32_t>(ids.begin() + i, ids.end())));
    size_t at = 0;
    std::string want = AnswerText(ToyTokenizer(), shown, stops, ids, &at);
    if (at != std::string::npos) want.resize(at);
    INFO("seed " << seed);
    CHECK(r.Text() == want);
    CHECK(s.text() == want);
    CHECK(s.stopped() == (at != std::string::npos));
    CHECK(s.num_tokens() == static_cast<int>(ids.size()));
  }
}

}  // namespace stream_assembler_test
}  // namespace textgen
