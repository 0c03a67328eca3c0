// Shared helpers for the grammar tests.
#ifndef TEXTGEN_TESTS_ENGINE_GRAMMAR_GRAMMAR_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_GRAMMAR_GRAMMAR_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"

namespace textgen::testing {

inline std::shared_ptr<const Grammar> MustParse(std::string_view gbnf,
                                                std::string_view root = "root") {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = ParseGbnf(gbnf, root);
  if (!g.ok()) FAIL(g.status().ToString() << "\n" << gbnf);
  return *g;
}

// Whether `text` is a complete sentence of the grammar.
inline bool Matches(std::string_view gbnf, std::string_view text) {
  GrammarMatcher m(MustParse(gbnf));
  return m.AcceptString(text) && m.CanEnd();
}

// Whether `text` is a prefix of some sentence.
inline bool IsPrefix(std::string_view gbnf, std::string_view text) {
  GrammarMatcher m(MustParse(gbnf));
  return m.AcceptString(text);
}

// The error ParseGbnf returns ("" when it parses).
inline std::string ParseError(std::string_view gbnf, const GrammarLimits& limits = {}) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = ParseGbnf(gbnf, "root", limits);
  if (g.ok()) return "";
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_GRAMMAR_GRAMMAR_TEST_UTIL_H_
