#include "engine/tokenizer/pretokenizer.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace textgen {
namespace pretokenizer_test {

std::vector<std::string> SplitWith(const PreTokenizer& p, std::string_view s) {
  std::vector<std::string> out;
  for (std::string_view w : p.Split(s)) out.emplace_back(w);
  return out;
}

TEST_CASE("The gpt-2 regex list splits as GPT-2's pre-tokenizer", "[tokenizer][pretokenizer]") {
  auto p = PreTokenizer::ForName("gpt-2");
  REQUIRE(p.ok());
  using V = std::vector<std::string>;
  const auto split = [&](std::string_view s) { return SplitWith(**p, s); };
  CHECK(split("") == V{});
  CHECK(split("Hello world") == V{"Hello", " world"});
  CHECK(split("I've been 'told") == V{"I", "'ve", " been", " '", "told"});
  CHECK(split("it's 'S") == V{"it", "'s", " '", "S"});
  CHECK(split("a   b") == V{"a", "  ", " b"});
  CHECK(split("a \n b") == V{"a", " \n", " b"});
  CHECK(split("x\n\ny") == V{"x", "\n", "\n", "y"});
  CHECK(split("\t\tfoo") == V{"\t", "\t", "foo"});
  CHECK(split("end   ") == V{"end", "   "});
  CHECK(split("3.14 abc123") == V{"3", ".", "14", " abc", "123"});
  CHECK(split(" !!?x") == V{" !!?", "x"});
  CHECK(split("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD") ==
        V{"caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"});
}

TEST_CASE("An unknown pre-tokenizer name is Unimplemented", "[tokenizer][pretokenizer]") {
  auto p = PreTokenizer::ForName("no-such-pretokenizer");
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kUnimplemented);
  CHECK(std::string(p.status().message()).find("no-such-pretokenizer") != std::string::npos);
}

}  // namespace pretokenizer_test
}  // namespace textgen
