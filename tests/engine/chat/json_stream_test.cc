// The byte-at-a-time JSON checker and string decoder against nlohmann's parser, on random texts.
#include "engine/chat/json_stream.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "nlohmann/json.hpp"

namespace textgen {
namespace json_stream_test {

// Whether `text` is exactly one JSON value by JsonScanner: every byte accepted and the last
// one completing it (or a number that may end there).
bool ScannerAccepts(const std::string& text) {
  if (text.empty()) return false;
  JsonScanner s;
  for (size_t i = 0; i < text.size(); ++i) {
    const JsonScanner::Result r = s.Push(text[i]);
    if (r == JsonScanner::Result::kError || r == JsonScanner::Result::kDoneBefore) return false;
    if (r == JsonScanner::Result::kDone) return i + 1 == text.size();
  }
  return s.CanEndHere();
}

TEST_CASE("JsonScanner accepts exactly the JSON values", "[json_stream]") {
  for (const char* ok : {"{}", "[]", "{\"a\": [1, -2.5e+3, true, false, null, \"x\\u00e9\\n\"]}",
                         "[{\"k\":{}} , [ ]]", "0", "-0.5", "12E3", "\"s\"", "true", "null"}) {
    INFO(ok);
    CHECK(ScannerAccepts(ok));
  }
  for (const char* bad :
       {"{", "{\"a\"}", "{\"a\":}", "[1,]", "[01]", "{'a': 1}", "\"\n\"", "\"\\x\"", "\"\\u12G4\"",
        "tru", "nul", "-", "1.", "1e", " {}", "{}}", "[1 2]", "{\"a\":1,}"}) {
    INFO(bad);
    CHECK_FALSE(ScannerAccepts(bad));
  }
  const std::string alphabet = "{}[]\":,0123456789.-+eEtrufalsn \\\n\tu\"ab";
  std::mt19937 rng(42);
  int accepted = 0;
  for (int round = 0; round < 200000; ++round) {
    std::string text;
    const int n = 1 + rng() % 12;
    for (int i = 0; i < n; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
    // nlohmann allows surrounding whitespace; the scanner's values start at their first byte.
    // nlohmann also refuses numbers beyond a double's range (8e400), before it has read the
    // rest: such texts say nothing about syntax and are skipped.
    bool out_of_range = false;
    try {
      const nlohmann::json parsed = nlohmann::json::parse(text);
      (void)parsed;
    } catch (const nlohmann::json::out_of_range&) {
      out_of_range = true;
    } catch (const nlohmann::json::exception&) {
    }
    if (out_of_range) continue;
    const bool want = nlohmann::json::accept(text) && text.front() != ' ' && text.front() != '\n' &&
                      text.front() != '\t' && text.back() != ' ' && text.back() != '\n' &&
                      text.back() != '\t';
    INFO(nlohmann::json(text).dump());
    REQUIRE(ScannerAccepts(text) == want);
    accepted += want;
  }
  CHECK(accepted > 1000);
}

TEST_CASE("JsonStringDecoder decodes as nlohmann does", "[json_stream]") {
  auto decode = [](const std::string& body, std::string* out) {
    JsonStringDecoder d;
    for (size_t i = 0; i < body.size(); ++i) {
      const auto r = d.Push(body[i], out);
      if (r == JsonStringDecoder::Result::kError) return false;
      if (r == JsonStringDecoder::Result::kDone) return i + 1 == body.size();
    }
    return false;
  };
  std::string out;
  REQUIRE(decode(R"(a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00")", &out));
  CHECK(out == "a\"b\\c/d\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80");
  for (const char* bad : {R"(\ud83d")", R"(\ude00")", R"(\ud83dx")", R"(\q")", "a\nb\"", "abc"}) {
    out.clear();
    INFO(bad);
    CHECK_FALSE(decode(bad, &out));
  }
  const std::string alphabet = "ab\\\"u0dDe8F/nt\x01";
  std::mt19937 rng(7);
  for (int round = 0; round < 100000; ++round) {
    std::string body;
    const int n = rng() % 14;
    for (int i = 0; i < n; ++i) body.push_back(alphabet[rng() % alphabet.size()]);
    body.push_back('"');
    const std::string quoted = "\"" + body;
    nlohmann::json want = nlohmann::json::parse(quoted, nullptr, false);
    std::string got;
    INFO(nlohmann::json(quoted).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const bool ok = decode(body, &got);
    REQUIRE(ok == (!want.is_discarded() && want.is_string()));
    if (ok) REQUIRE(got == want.get<std::string>());
  }
}

TEST_CASE("AppendJsonEscaped writes JSON string bodies", "[json_stream]") {
  const std::string text = "q\"b\\n\n\r\t\x01\x1f é😀";
  std::string body;
  AppendJsonEscaped(text, &body);
  CHECK(body == "q\\\"b\\\\n\\n\\r\\t\\u0001\\u001f é😀");
  CHECK(nlohmann::json::parse("\"" + body + "\"").get<std::string>() == text);
}

}  // namespace json_stream_test
}  // namespace textgen
