// Limits and pathological grammars: refused with "grammar too complex" or handled, each well
// within a second; bad input never hangs.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "engine/grammar/grammar_matcher.h"
#include "tests/engine/grammar/grammar_test_util.h"

namespace textgen {
namespace grammar_limits_test {

using testing::MustParse;
using testing::ParseError;

// Sanitizer builds run several times slower; the bound scales with them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSecond = 5.0;
#else
constexpr double kSecond = 1.0;
#endif

// Runs f and checks it took under a second.
template <typename F>
void WithinASecond(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < kSecond);
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST_CASE("limits: huge repetition counts", "[grammar][limits]") {
  WithinASecond([] {
    CHECK(ParseError(R"(root ::= "a"{0,100000})") ==
          "1:13: grammar too complex: repetition count above 65000");
    CHECK(ParseError(R"(root ::= "a"{99999999999999999999})") ==
          "1:13: grammar too complex: repetition count above 65000");
  });
  // Within the limit a bound costs one node, not 60000 copies, and is counted exactly.
  std::shared_ptr<const Grammar> g;
  WithinASecond([&] { g = MustParse(R"(root ::= "a"{0,60000} "b")"); });
  CHECK(g->nodes().size() < 20);
  GrammarMatcher m(g);
  REQUIRE(m.AcceptString(std::string(60000, 'a')));
  CHECK_FALSE(m.AcceptString("a"));
  CHECK(m.AcceptString("b"));
  CHECK(m.CanEnd());
  // Nested bounds multiply nothing either. (This grammar is ambiguous: each "x" may end any of
  // the three repetitions, so the stacks grow until max_stacks refuses more input.)
  WithinASecond([] {
    auto g = MustParse(R"(root ::= (("x"{0,60000}){0,60000}){0,60000})");
    CHECK(g->nodes().size() < 40);
    GrammarMatcher m(g);
    CHECK(m.AcceptString("xxxxxxxx"));
    CHECK(m.CanEnd());
    for (int i = 0; i < 20; ++i) CHECK(m.AcceptString("x"));
  });
}

TEST_CASE("limits: nesting rules literals input size and nodes", "[grammar][limits]") {
  WithinASecond([] {
    std::string deep = "root ::= " + Repeat("(", 5000) + "\"a\"" + Repeat(")", 5000);
    CHECK(ParseError(deep) == "1:110: grammar too complex: parentheses nested deeper than 100");
    std::string ok = "root ::= " + Repeat("(", 90) + "\"a\"" + Repeat(")", 90);
    CHECK(testing::Matches(ok, "a"));
  });
  WithinASecond([] {
    std::string many = "root ::= r0\n";
    for (int i = 0; i < 25000; ++i) {
      many += "r" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1) + "\n";
    }
    CHECK(ParseError(many).find("grammar too complex: more than 20000 rules") != std::string::npos);
  });
  WithinASecond([] {
    CHECK(ParseError("root ::= \"" + std::string(70000, 'a') + "\"") ==
          "1:10: grammar too complex: literal longer than 65536 bytes");
    CHECK(ParseError("root ::= \"a\"\n" + std::string(2 << 20, '#')) ==
          "grammar too complex: 2097165 bytes of grammar text (limit 1048576)");
  });
  WithinASecond([] {
    // ~20 nodes per negated class: 40000 of them pass the node limit.
    std::string classes = "root ::= " + Repeat("[^a] ", 40000);
    CHECK(ParseError(classes).find("grammar too complex: more than 500000 automaton nodes") !=
          std::string::npos);
  });
  GrammarLimits tight;
  tight.max_rules = 3;
  CHECK(ParseError("root ::= a b c d\na ::= \"a\"\nb ::= \"b\"\nc ::= \"c\"\nd ::= \"d\"", tight)
            .find("grammar too complex") != std::string::npos);
}

TEST_CASE("limits: left recursion refused quickly", "[grammar][limits]") {
  WithinASecond([] {
    CHECK(ParseError("root ::= a\na ::= a a | \"x\"").find("left recursion: rule 'a'") == 0);
    // A long chain that loops back at its end.
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 5000; ++i) {
      chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    }
    chain += "r5000 ::= r0 | \"y\"\n";
    CHECK(ParseError(chain).find("left recursion: rule 'r") == 0);
  });
}

TEST_CASE("limits: ambiguity and depth are bounded at run time", "[grammar][limits]") {
  WithinASecond([] {
    // Every "a" doubles the distinct parse stacks; past max_stacks some parses are dropped.
    GrammarMatcher m(MustParse(R"(root ::= s
s ::= "a" s "b" | "a" s "c" | "")"));
    int accepted = 0;
    while (accepted < 24 && m.AcceptString("a")) ++accepted;
    CHECK(accepted == 24);
    CHECK(m.num_stacks() == GrammarLimits().max_stacks);
    CHECK(m.AcceptString("b"));
  });
  WithinASecond([] {
    GrammarMatcher m(MustParse(R"g(root ::= "(" root ")" | "")g"));
    CHECK(m.AcceptString(std::string(1000, '(')));
    CHECK(m.AcceptString(std::string(1000, ')')));
    CHECK(m.CanEnd());
    GrammarMatcher deep(MustParse(R"g(root ::= "(" root ")" | "")g"));
    CHECK_FALSE(deep.AcceptString(std::string(5000, '(')));  // deeper than max_stack_depth
  });
}

TEST_CASE("limits: arbitrary bytes never crash the parser", "[grammar][limits]") {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>((i * 7919) % 256));
  WithinASecond([&] {
    for (size_t start = 0; start + 64 <= junk.size(); start += 61) {
      (void)ParseGbnf("root ::= " + junk.substr(start, 64));
      (void)ParseGbnf(junk.substr(start, 64));
    }
  });
}

}  // namespace grammar_limits_test
}  // namespace textgen
