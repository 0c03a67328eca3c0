#include "engine/decoding/stop_matcher.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

namespace textgen {
namespace stop_matcher_test {

TEST_CASE("StopMatcher: a stop inside one push", "[stop_matcher]") {
  StopMatcher m({"END"});
  CHECK(m.Push("hello ") == "hello ");
  CHECK(m.Push("worldEND and more") == "world");
  CHECK(m.stopped());
  CHECK(m.matched() == "END");
  CHECK(m.held_back() == 0);
  CHECK(m.Push("after") == "");
  CHECK(m.Flush() == "");
}

TEST_CASE("StopMatcher: a single-token stop", "[stop_matcher]") {
  StopMatcher m({"\n"});
  CHECK(m.Push("a") == "a");
  CHECK(m.Push("\n") == "");
  CHECK(m.stopped());
  CHECK(m.matched() == "\n");
}

TEST_CASE("StopMatcher: a stop spanning three pushes", "[stop_matcher]") {
  StopMatcher m({"<|end|>"});
  CHECK(m.Push("text <|") == "text ");
  CHECK(m.held_back() == 2);
  CHECK(m.Push("en") == "");
  CHECK(m.held_back() == 4);
  CHECK_FALSE(m.stopped());
  CHECK(m.Push("d|> tail") == "");
  CHECK(m.stopped());
  CHECK(m.matched() == "<|end|>");
}

TEST_CASE("StopMatcher: holds back only the minimal suffix", "[stop_matcher]") {
  StopMatcher m({"\n\n"});
  CHECK(m.Push("a\n") == "a");
  CHECK(m.held_back() == 1);
  CHECK(m.Push("b") == "\nb");  // the held newline turned out not to start a stop
  CHECK(m.held_back() == 0);
  CHECK(m.Push("\n") == "");
  CHECK(m.Push("\n") == "");
  CHECK(m.stopped());

  StopMatcher n({"abc"});
  CHECK(n.Push("xab") == "x");
  CHECK(n.Push("x") == "abx");
  CHECK(n.Push("a") == "");
  CHECK(n.Flush() == "a");
  CHECK_FALSE(n.stopped());
}

TEST_CASE("StopMatcher: overlapping prefixes", "[stop_matcher]") {
  // "aab" with stop "ab": the first "a" is released once the second shows it cannot start
  // the stop.
  StopMatcher m({"ab"});
  CHECK(m.Push("a") == "");
  CHECK(m.Push("a") == "a");
  CHECK(m.held_back() == 1);
  CHECK(m.Push("b") == "");
  CHECK(m.stopped());

  // A stop whose own prefix repeats: "aab" in "aaab" matches one byte in.
  StopMatcher n({"aab"});
  CHECK(n.Push("a") == "");
  CHECK(n.Push("a") == "");
  CHECK(n.Push("a") == "a");
  CHECK(n.held_back() == 2);
  CHECK(n.Push("b") == "");
  CHECK(n.stopped());
}

TEST_CASE("StopMatcher: with several stops the earliest completion wins", "[stop_matcher]") {
  {
    StopMatcher m({"long stop", "st"});
    CHECK(m.Push("a long s") == "a ");
    CHECK(m.Push("t") == "long ");  // "st" completes while "long stop" is still open
    CHECK(m.matched() == "st");
  }
  {
    // Same end: the longer (earlier-starting) stop, so no stop text leaks.
    StopMatcher m({"b", "ab"});
    CHECK(m.Push("xab") == "x");
    CHECK(m.matched() == "ab");
  }
  {
    // Both in one push: the one ending first, even though it is listed second.
    StopMatcher m({"zzz", "y"});
    CHECK(m.Push("1y2zzz") == "1");
    CHECK(m.matched() == "y");
  }
  {
    // Held back for the longest possible candidate across stops.
    StopMatcher m({"abcd", "bx"});
    CHECK(m.Push("zabc") == "z");
    CHECK(m.held_back() == 3);
    CHECK(m.Push("x") == "abcx");  // "abcx" can start neither
    CHECK_FALSE(m.stopped());
  }
}

TEST_CASE("StopMatcher: held-back text is flushed at the end", "[stop_matcher]") {
  StopMatcher m({"###"});
  CHECK(m.Push("done ##") == "done ");
  CHECK(m.held_back() == 2);
  CHECK(m.Flush() == "##");
  CHECK(m.held_back() == 0);
  CHECK(m.Flush() == "");
  CHECK_FALSE(m.stopped());
  CHECK(m.matched().empty());
}

TEST_CASE("StopMatcher: multi-byte UTF-8 stops", "[stop_matcher]") {
  StopMatcher m({"\xE3\x80\x82\xE2\x80\x94"});  // "。—"
  CHECK(m.Push("caf\xC3\xA9 ") == "caf\xC3\xA9 ");
  CHECK(m.Push("\xE3\x80\x82") == "");  // "。" may start the stop
  CHECK(m.held_back() == 3);
  CHECK(m.Push("\xF0\x9F\x98\x80") == "\xE3\x80\x82\xF0\x9F\x98\x80");  // "。😀"
  CHECK(m.Push("\xE3\x80\x82") == "");
  CHECK(m.Push("\xE2\x80\x94 rest") == "");
  CHECK(m.stopped());

  // A stop sharing a lead byte with other characters never splits them.
  StopMatcher n({"\xC3\xA9t\xC3\xA9"});     // "été"
  CHECK(n.Push("\xC3\xA0") == "\xC3\xA0");  // "à": same lead byte, different character
  CHECK(n.Push("\xC3\xA9") == "");
  CHECK(n.Push("x") == "\xC3\xA9x");
}

TEST_CASE("StopMatcher: empty stops are ignored, no stops passes text through", "[stop_matcher]") {
  StopMatcher m({"", ""});
  CHECK(m.Push("abc") == "abc");
  CHECK(m.held_back() == 0);
  CHECK_FALSE(m.stopped());
  StopMatcher none({});
  CHECK(none.Push("x") == "x");
}

TEST_CASE("StopMatcher: without a match, outputs + Flush reproduce the input", "[stop_matcher]") {
  // Random text over a small alphabet against stops that keep almost matching.
  const std::vector<std::string> stops = {"abab c", "bba\xC3\xA9", "cccc"};
  std::mt19937 rng(99);
  const std::vector<std::string> pieces = {"a", "b", " ", "c", "ab", "\xC3\xA9", "ba"};
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    StopMatcher m(stops);
    std::string input;
    std::string output;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n && !m.stopped(); ++i) {
      const std::string piece = pieces[rng() % pieces.size()];
      input += piece;
      output += m.Push(piece);
      if (!m.stopped()) REQUIRE(output.size() + m.held_back() == input.size());
    }
    if (m.stopped()) {
      // The output is the input up to the first place any stop ends, minus that stop.
      size_t end = std::string::npos;
      for (const std::string& s : stops) {
        const size_t pos = input.find(s);
        if (pos != std::string::npos) end = std::min(end, pos + s.size());
      }
      REQUIRE(end != std::string::npos);
      CHECK(output + m.matched() == input.substr(0, end));
      continue;
    }
    output += m.Flush();
    CHECK(output == input);
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("StopMatcher: ValidateStops names the field", "[stop_matcher]") {
  CHECK(ValidateStops({}).ok());
  CHECK(ValidateStops({"\n\n", "", "\xE3\x80\x82"}).ok());
  CHECK(ValidateStops(std::vector<std::string>(16, "x")).ok());
  CHECK(ValidateStops({std::string(256, 'x')}).ok());

  absl::Status s = ValidateStops(std::vector<std::string>(17, "x"));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "stop must have at most 16 entries, got 17");
  s = ValidateStops({"ok", std::string(257, 'x')});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "stop[1] must be at most 256 bytes, got 257");
  for (const std::string bad : {"\xC3", "\xC3(", "\xC0\xAF", "\xED\xA0\x80", "\xFF"}) {
    s = ValidateStops({bad});
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message() == "stop[0] is not valid UTF-8");
  }
}

}  // namespace stop_matcher_test
}  // namespace textgen
