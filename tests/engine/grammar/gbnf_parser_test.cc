// GBNF syntax (llama.cpp's): every element, and every error with its line:column.
#include <catch2/catch.hpp>
#include <string>

#include "tests/engine/grammar/grammar_test_util.h"

namespace textgen {
namespace gbnf_parser_test {

using testing::IsPrefix;
using testing::Matches;
using testing::MustParse;
using testing::ParseError;

TEST_CASE("gbnf: literals and escapes", "[grammar][parser]") {
  CHECK(Matches(R"(root ::= "abc")", "abc"));
  CHECK_FALSE(Matches(R"(root ::= "abc")", "ab"));
  CHECK_FALSE(Matches(R"(root ::= "abc")", "abcd"));
  CHECK(Matches(R"(root ::= "a\nb\rc\td\\e\"f")", "a\nb\rc\td\\e\"f"));
  CHECK(Matches(R"(root ::= "\[\]\-")", "[]-"));
  // \x, \u and \U name code points, encoded as UTF-8 (llama.cpp's meaning).
  CHECK(Matches(R"(root ::= "\x41\xe9")", "A\xC3\xA9"));
  CHECK(Matches(R"(root ::= "\u00e9\u4e2d")", "\xC3\xA9\xE4\xB8\xAD"));
  CHECK(Matches(R"(root ::= "\U0001F600")", "\xF0\x9F\x98\x80"));
  CHECK(Matches("root ::= \"\xC3\xA9\xF0\x9F\x98\x80\"", "\xC3\xA9\xF0\x9F\x98\x80"));
  CHECK(Matches(R"(root ::= "")", ""));
  CHECK(Matches(R"(root ::= "a" "" "b")", "ab"));
}

TEST_CASE("gbnf: character classes", "[grammar][parser]") {
  const char* g = R"(root ::= [a-z0-9_\-]+)";
  CHECK(Matches(g, "abc_0-9"));
  CHECK_FALSE(Matches(g, "abC"));
  CHECK_FALSE(Matches(g, ""));
  CHECK(Matches(R"(root ::= [^a-z]*)", "ABC 12\xC3\xA9"));
  CHECK_FALSE(Matches(R"(root ::= [^a-z]*)", "AbC"));
  CHECK(Matches(R"(root ::= [-a]+)", "-a-"));   // leading '-' is literal
  CHECK(Matches(R"(root ::= [a-]+)", "a--a"));  // trailing '-' too
  CHECK(Matches(R"(root ::= [\]\[\\\x41]+)", "][\\A"));
  CHECK(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\xA9"));
  CHECK_FALSE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\x9F"));  // U+00DF
  // Negated classes span all of Unicode (minus surrogates), in UTF-8.
  CHECK(Matches(R"(root ::= [^"])", "\xF0\x9F\x98\x80"));
  CHECK(Matches(R"(root ::= [^"])", "\xEF\xBF\xBF"));
  CHECK_FALSE(Matches(R"(root ::= [^"])", "\xED\xA0\x80"));  // a surrogate is not UTF-8
  CHECK_FALSE(Matches(R"(root ::= [^"])", "\xC3"));          // incomplete
  CHECK(IsPrefix(R"(root ::= [^"])", "\xC3"));               // ... but a valid prefix
  CHECK_FALSE(IsPrefix(R"(root ::= [^"])", "\x80"));         // a lone continuation byte
}

TEST_CASE("gbnf: any character", "[grammar][parser]") {
  CHECK(Matches("root ::= . . .", "a\n\xE4\xB8\xAD"));
  CHECK_FALSE(Matches("root ::= .", "ab"));
  CHECK_FALSE(Matches("root ::= .", ""));
}

TEST_CASE("gbnf: alternatives groups sequences and newlines", "[grammar][parser]") {
  const char* g = R"(
# a comment line
root ::= greeting " " name   # trailing comment
greeting ::= "hi" | "hello" |
    "hey"
name ::= (
  "bob" |   # newlines are free inside parentheses
  "alice"
) ("!" | "")
)";
  CHECK(Matches(g, "hi bob"));
  CHECK(Matches(g, "hey alice!"));
  CHECK(Matches(g, "hello bob!"));
  CHECK_FALSE(Matches(g, "hello carol"));
  CHECK_FALSE(Matches(g, "hibob"));
  // Empty alternatives (as json-schema-to-grammar's `ws ::= | " "`).
  CHECK(Matches(R"(root ::= "a" ws "b"
ws ::= | " " | "\n")",
                "a b"));
  CHECK(Matches(R"(root ::= "a" ws "b"
ws ::= | " " | "\n")",
                "ab"));
  // Rule names with digits, '-' and '_'; CRLF line ends.
  CHECK(Matches("root ::= my-rule_2\r\nmy-rule_2 ::= \"x\"\r\n", "x"));
}

TEST_CASE("gbnf: repetitions", "[grammar][parser]") {
  CHECK(Matches(R"(root ::= "a"*)", ""));
  CHECK(Matches(R"(root ::= "a"*)", "aaaa"));
  CHECK_FALSE(Matches(R"(root ::= "a"+)", ""));
  CHECK(Matches(R"(root ::= "a"+)", "aaa"));
  CHECK(Matches(R"(root ::= "a"? "b")", "b"));
  CHECK(Matches(R"(root ::= "a"? "b")", "ab"));
  CHECK_FALSE(Matches(R"(root ::= "a"? "b")", "aab"));
  // A repetition applies to the whole preceding literal, group or rule.
  CHECK(Matches(R"(root ::= "ab"{2})", "abab"));
  CHECK_FALSE(Matches(R"(root ::= "ab"{2})", "aba"));
  const char* range = R"(root ::= [0-9]{2,4})";
  CHECK_FALSE(Matches(range, "1"));
  CHECK(Matches(range, "12"));
  CHECK(Matches(range, "1234"));
  CHECK_FALSE(Matches(range, "12345"));
  const char* at_least = R"(root ::= ("x" | "y"){ 3 , } "!")";
  CHECK_FALSE(Matches(at_least, "xy!"));
  CHECK(Matches(at_least, "xyx!"));
  CHECK(Matches(at_least, "xyxyyyxxyx!"));
  CHECK(Matches(R"(root ::= "a"{0})", ""));
  CHECK(Matches(R"(root ::= "a"{0,0} "b")", "b"));
  CHECK(Matches(R"(root ::= ("a" | "bc"){1,3})", "bcabc"));
  CHECK_FALSE(Matches(R"(root ::= ("a" | "bc"){1,3})", "bcabca"));
  // Nested bounded repetitions count independently.
  const char* nested = R"(root ::= ("[" [0-9]{1,2} "]"){2,3})";
  CHECK(Matches(nested, "[1][22][3]"));
  CHECK_FALSE(Matches(nested, "[1][222]"));
  CHECK_FALSE(Matches(nested, "[1]"));
  CHECK_FALSE(Matches(nested, "[1][2][3][4]"));
}

TEST_CASE("gbnf: repetition of something that can be empty", "[grammar][parser]") {
  // x{m,n} with a nullable x: the empty iterations fill up the minimum.
  const char* g = R"(root ::= ("a"?){3,5} "b")";
  CHECK(Matches(g, "b"));
  CHECK(Matches(g, "aaaaab"));
  CHECK_FALSE(Matches(g, "aaaaaab"));
  CHECK(Matches(R"(root ::= ("a"?)* "b")", "aaab"));
  CHECK(Matches(R"(root ::= ("a" | "")+ "b")", "b"));
  const char* opt_rule = R"(root ::= x{2,3} "."
x ::= "y"?)";
  CHECK(Matches(opt_rule, "yyy."));
  CHECK(Matches(opt_rule, "."));
  CHECK_FALSE(Matches(opt_rule, "yyyy."));
}

TEST_CASE("gbnf: recursion and the root", "[grammar][parser]") {
  const char* g = R"(root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= [0-9]+ | list)";
  CHECK(Matches(g, "[]"));
  CHECK(Matches(g, "[1,[2,[]],[[3]]]"));
  CHECK_FALSE(Matches(g, "[1,[2]"));
  // Another root.
  CHECK(Matches(R"(root ::= "a"
other ::= "b")",
                "a"));
  GrammarMatcher m(MustParse("root ::= \"a\"\nother ::= \"b\"", "other"));
  CHECK(m.AcceptString("b"));
  CHECK(m.CanEnd());
  // A rule defined twice keeps the last definition, as in llama.cpp.
  CHECK(Matches("root ::= \"a\"\nroot ::= \"b\"", "b"));
  CHECK_FALSE(Matches("root ::= \"a\"\nroot ::= \"b\"", "a"));
}

TEST_CASE("gbnf: token elements parse", "[grammar][parser]") {
  auto g = MustParse(R"(root ::= <[12]> "x" !<[7]> <|im_end|> !<think>)");
  REQUIRE(g->token_refs().size() == 4);
  CHECK(g->token_refs()[0].id == 12);
  CHECK(g->token_refs()[1].id == 7);
  CHECK(g->token_refs()[2].text == "<|im_end|>");
  CHECK(g->token_refs()[3].text == "<think>");
  CHECK(g->has_token_edges());
}

TEST_CASE("gbnf: syntax errors name line and column", "[grammar][parser]") {
  CHECK(ParseError("") == "1:1: empty grammar: no rules");
  CHECK(ParseError("  # only a comment\n\n") == "3:1: empty grammar: no rules");
  CHECK(ParseError("root ::= \"abc") == "1:10: unterminated string literal");
  CHECK(ParseError("root ::= \"ab\nc\"") == "1:10: unterminated string literal (newline inside)");
  CHECK(ParseError("root ::= \"a\\qb\"") == "1:12: unknown escape '\\q'");
  CHECK(ParseError("root ::= \"\\x4\"") == "1:11: expected 2 hex digits after '\\x'");
  CHECK(ParseError("root ::= \"\\uD800\"") == "1:11: surrogate code point U+D800");
  CHECK(ParseError("root ::= \"\\U00110000\"") == "1:11: code point U+110000 is beyond U+10FFFF");
  CHECK(ParseError("root ::= [a-z") == "1:10: unterminated character class");
  CHECK(ParseError("root ::= []") == "1:10: empty character class");
  CHECK(ParseError("root ::= [z-a]") == "1:11: invalid range U+007A-U+0061 in character class");
  CHECK(ParseError("root ::= x\nx ::= y") == "2:7: undefined rule 'y'");
  CHECK(ParseError("root ::= \"a\"{5,2}") ==
        "1:13: invalid repetition {5,2}: maximum below minimum");
  CHECK(ParseError("root ::= \"a\"{,2}") == "1:14: expected a number in '{...}'");
  CHECK(ParseError("root ::= \"a\"{2") == "1:15: expected ',' or '}' in '{...}'");
  CHECK(ParseError("root ::= \"a\"{2,3") == "1:17: expected '}'");
  CHECK(ParseError("root ::= * \"a\"") == "1:10: '*' without a preceding item");
  CHECK(ParseError("root ::= (\"a\"") == "1:10: unclosed '('");
  CHECK(ParseError("root ::= (\"a\" ]") == "1:15: expected ')'");
  CHECK(ParseError("root ::= \"a\" )") == "1:14: unexpected ')'");
  CHECK(ParseError("root \"a\"") == "1:6: expected '::=' after rule name 'root'");
  CHECK(ParseError("::= \"a\"") == "1:1: expected a rule name");
  CHECK(ParseError("root ::= \"a\" ]") ==
        "1:14: expected a newline or the end after rule 'root', found ']'");
  CHECK(ParseError("other ::= \"a\"") == "1:1: the grammar has no rule named 'root' (its root)");
  CHECK(ParseError("root ::= <[12") == "1:14: expected ']>' after the token id");
  CHECK(ParseError("root ::= <[]>") == "1:12: expected a token id after '<['");
  CHECK(ParseError("root ::= <|im_end|") == "1:10: unterminated token reference (expected '>')");
  CHECK(ParseError("root ::= ! \"a\"") == "1:11: expected '<' after '!'");
  CHECK(ParseError("root ::= \"\xC3\"") == "1:11: invalid UTF-8 in grammar");
  CHECK(ParseError("root ::= \"a\"\n  b ::= \"c\"\nroot2 ::= q") == "3:11: undefined rule 'q'");
}

TEST_CASE("gbnf: left recursion is refused naming the rule", "[grammar][parser]") {
  CHECK(ParseError("root ::= a\na ::= a a | \"x\"") ==
        "left recursion: rule 'a' can reach itself without consuming input (not supported, as "
        "in llama.cpp)");
  // Through a nullable prefix and another rule.
  CHECK(ParseError("root ::= b\nb ::= ws c\nc ::= b \"x\" | \"y\"\nws ::= \" \"?")
            .find("left recursion: rule '") == 0);
  CHECK(ParseError("root ::= (\"x\"? root)* \"y\"").find("left recursion: rule 'root'") == 0);
  // Right recursion is fine.
  CHECK(Matches("root ::= \"x\" root | \"y\"", "xxxy"));
}

}  // namespace gbnf_parser_test
}  // namespace textgen
