// Regex -> GBNF: the grammar accepts exactly the texts the whole of which the pattern matches;
// unsupported features are refused by name with their offset.
#include "engine/grammar/regex_to_gbnf.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "tests/engine/grammar/grammar_test_util.h"

namespace textgen {
namespace regex_to_gbnf_test {

// Sanitizer builds run several times slower; time bounds scale with them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSecond = 5.0;
#else
constexpr double kSecond = 1.0;
#endif

// Whether `text` is a complete sentence of `gbnf`; the last grammar is kept parsed (the checks
// below try many texts against one grammar).
bool Matches(const std::string& gbnf, std::string_view text) {
  static std::string* last_text = new std::string;
  static std::shared_ptr<const Grammar>* last = new std::shared_ptr<const Grammar>;
  if (*last == nullptr || *last_text != gbnf) {
    *last = testing::MustParse(gbnf);
    *last_text = gbnf;
  }
  GrammarMatcher m(*last);
  return m.AcceptString(text) && m.CanEnd();
}

void Check(const std::string& pattern, const std::vector<std::string>& good,
           const std::vector<std::string>& bad) {
  absl::StatusOr<std::string> g = RegexToGbnf(pattern);
  INFO(pattern);
  REQUIRE(g.ok());
  for (const std::string& text : good) {
    INFO("accepts " << text << "\n" << *g);
    CHECK(Matches(*g, text));
  }
  for (const std::string& text : bad) {
    INFO("refuses " << text << "\n" << *g);
    CHECK_FALSE(Matches(*g, text));
  }
}

std::string Error(const std::string& pattern) {
  absl::StatusOr<std::string> g = RegexToGbnf(pattern);
  if (g.ok()) FAIL("converted: " << pattern << "\n" << *g);
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST_CASE("regex: literals, dot, alternation, groups", "[grammar][regex]") {
  Check("abc", {"abc"}, {"ab", "abcd", ""});
  Check("^abc$", {"abc"}, {"xabc"});
  Check("a.c",
        {"abc", "a c",
         "a\xC3\xA9"
         "c"},
        {"a\nc", "a\rc", "ac",
         "a\xE2\x80\xA8"
         "c"});
  Check("cat|dog|", {"cat", "dog", ""}, {"catdog"});
  Check("^A|B|C|D$", {"A", "B", "D"}, {"AB", ""});
  Check("(ab|cd)e", {"abe", "cde"}, {"ab", "ce"});
  Check("(?:foo|bar)baz", {"foobaz", "barbaz"}, {"baz"});
  Check("(?<year>\\d{4})-(?:(?:ab)+c)?d", {"2024-d", "2024-ababcd"}, {"2024-abd"});
  Check("\xC3\xA9+\xE4\xB8\xAD", {"\xC3\xA9\xC3\xA9\xE4\xB8\xAD"}, {"\xE4\xB8\xAD"});
}

TEST_CASE("regex: quantifiers", "[grammar][regex]") {
  Check("ab?c*d+", {"ad", "abccdd", "acd"}, {"abbd", "ab"});
  Check("a{3}", {"aaa"}, {"aa", "aaaa"});
  Check("a{2,}", {"aa", "aaaaaa"}, {"a"});
  Check("a{2,4}", {"aa", "aaaa"}, {"a", "aaaaa"});
  Check("(ab){0,2}c", {"c", "abc", "ababc"}, {"abababc"});
  Check("a+?b*?c??", {"a", "abbc"}, {"b"});  // lazy: the same texts
  Check("x{70000}", {std::string(70000, 'x')}, {std::string(69999, 'x')});
}

TEST_CASE("regex: classes and escapes", "[grammar][regex]") {
  Check("[a-c0-2_]+", {"abc012_"}, {"d", "3", ""});
  Check("[^a-c]", {"d", "\xC3\xA9", "\n"}, {"a", "c"});
  Check("[-a]", {"-", "a"}, {"b"});
  Check("[a-]", {"-", "a"}, {"b"});
  Check("[\\]\\\\\\-^]", {"]", "\\", "-", "^"}, {"a"});
  Check("\\d\\w\\s", {"0a ", "9_\t", "5Z\xC2\xA0"},
        {"aa ", "0- ",
         "\xD9\xA3"
         "a "});
  Check("\\D\\W\\S", {"a-x", "\xC3\xA9 ."}, {"1-x", "aax", "a- ", "\xD9\xA3-x"});
  Check("[\\d.]+", {"1.5"}, {"a"});
  Check("[^\\d\\s]", {"a", "\xC3\xA9"}, {"1", " ", "\xD9\xA3"});
  Check("\\t\\n\\r\\v\\f\\0", {std::string("\t\n\r\v\f\0", 6)}, {"tnrvf0"});
  Check("\\x41\\u00e9\\cJ", {"A\xC3\xA9\n"}, {"x41"});
  Check("\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\/\\\\", {".*+?()[]{}|^$/\\"}, {""});
  Check("[\\b]", {"\b"}, {"b"});
  Check("a]b}c", {"a]b}c"}, {"abc"});
  Check("a{b", {"a{b"}, {"ab"});
}

TEST_CASE("regex: unsupported features are refused by name", "[grammar][regex]") {
  const struct {
    const char* pattern;
    const char* message;
  } cases[] = {
      {"(a)\\1", "unsupported regex feature at offset 4: backreference"},
      {"(?<n>a)\\k<n>", "unsupported regex feature at offset 8: named backreference \\k"},
      {"a(?=b)", "unsupported regex feature at offset 1: lookahead assertion"},
      {"a(?!b)", "unsupported regex feature at offset 1: lookahead assertion"},
      {"(?<=a)b", "unsupported regex feature at offset 0: lookbehind assertion"},
      {"(?<!a)b", "unsupported regex feature at offset 0: lookbehind assertion"},
      {"\\bword", "unsupported regex feature at offset 1: word boundary assertion \\b or \\B"},
      {"a*+", "unsupported regex feature at offset 2: possessive quantifier"},
      {"(?i)a", "unsupported regex feature at offset 0: inline flags or group extension (?...)"},
      {"(?P<x>a)", "unsupported regex feature at offset 0: Python-style named group (?P...)"},
      {"\\p{L}", "unsupported regex feature at offset 1: Unicode property escape \\p or \\P"},
      {"a^b",
       "unsupported regex feature at offset 1: anchor ^ anywhere but the start of the pattern"},
      {"a$b",
       "unsupported regex feature at offset 1: anchor $ anywhere but the end of the pattern"},
      {"(^a)",
       "unsupported regex feature at offset 1: anchor ^ anywhere but the start of the pattern"},
      {"\\a", "unsupported regex feature at offset 1: escape \\a"},
      {"\\x4", "unsupported regex feature at offset 1: \\x without two hex digits"},
      {"\\u{41}", "unsupported regex feature at offset 1: \\u{...} escape"},
      {"\\ud83d", "unsupported regex feature at offset 1: surrogate escape \\uD800-\\uDFFF"},
      {"\\01", "unsupported regex feature at offset 1: octal escape"},
      {"[]a]",
       "unsupported regex feature at offset 1: a class starting with ] ([] and [^] differ "
       "between dialects)"},
      {"[\\d-z]", "unsupported regex feature at offset 5: a class escape as a range end"},
      {"a{,5}", "unsupported regex feature at offset 1: the quantifier {,n}"},
      {"*a", "invalid regex at offset 0: nothing to repeat"},
      {"a**", "invalid regex at offset 2: nothing to repeat"},
      {"(a", "invalid regex at offset 2: missing )"},
      {"a)", "invalid regex at offset 1: unmatched )"},
      {"[a", "invalid regex at offset 2: unterminated character class"},
      {"[z-a]", "invalid regex at offset 4: range out of order in character class"},
      {"a{3,2}", "invalid regex at offset 1: numbers out of order in {} quantifier"},
      {"\\", "invalid regex at offset 1: \\ at the end of the pattern"},
      {"a\xFF", "invalid regex: not valid UTF-8 at byte 1"},
  };
  for (const auto& c : cases) {
    INFO(c.pattern);
    CHECK(Error(c.pattern) == c.message);
  }
  CHECK(Error("[^\\s\\S]") == "the regex matches no text");
}

TEST_CASE("regex: limits", "[grammar][regex]") {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "(";
  deep += "a";
  for (int i = 0; i < 300; ++i) deep += ")";
  CHECK(Error(deep) == "regex too complex: groups nested deeper than 256");
  CHECK(Error("a{1000001}") == "regex too complex: a repetition count above 1000000");
  std::string long_pattern;
  for (int i = 0; i < 50000; ++i) long_pattern += "[a-z]";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(Error(long_pattern).find("too complex") != std::string::npos);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < kSecond);
  // Nested counted repetitions are counted, not copied.
  Check("((ab){100}c){100}", {}, {"abc"});
  CHECK(RegexToGbnfRules("a", "x y").status().code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> rules = RegexToGbnfRules("(a|b)+", "re");
  REQUIRE(rules.ok());
  CHECK(Matches("root ::= re \"!\"\n" + *rules, "abba!"));
}

}  // namespace regex_to_gbnf_test
}  // namespace textgen
