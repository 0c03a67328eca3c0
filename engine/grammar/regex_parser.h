// A parser for the regular expressions that JSON Schema's `pattern` and clients' regex
// constraints use: the ECMA-262 subset that can be enforced exactly by a grammar and means the
// same in Python's `re` (which validators use). Everything else is refused by name.
#ifndef TEXTGEN_ENGINE_GRAMMAR_REGEX_PARSER_H_
#define TEXTGEN_ENGINE_GRAMMAR_REGEX_PARSER_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/regex_charset.h"

namespace textgen::json_schema_internal {

struct RegexNode {
  enum class Kind : uint8_t { kEmpty, kChars, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  CodePointSet chars;           // kChars: one code point of this set
  std::vector<RegexNode> kids;  // kSeq, kAlt; kRepeat: one
  int64_t min = 0, max = 0;     // kRepeat; max < 0: unbounded
};

// A top-level alternative and its anchors (`^` at its start, `$` at its end; anchors anywhere
// else are refused).
struct RegexBranch {
  bool anchored_start = false;
  bool anchored_end = false;
  RegexNode node;
};

struct ParsedRegex {
  std::vector<RegexBranch> branches;  // the pattern matches if any branch does
  bool fully_anchored() const;        // every branch has both anchors
};

// Supported: literals (UTF-8), escapes (\t \n \v \f \r \0 \cX \xHH \uHHHH and escaped syntax
// characters), `.`, classes [...] with ranges and negation, \d \w \s \D \W \S (as
// NarrowClassEscape / WideClassEscape define them), groups (capturing, (?:...), (?<name>...)),
// alternation, quantifiers ? * + {m} {m,} {m,n} (lazy ones too: they match the same texts),
// and ^ $ at the ends of top-level alternatives. InvalidArgument names anything else
// (backreferences, lookaround, \b, possessive quantifiers, inline flags, \p{...}, ...) or a
// syntax error, with its offset. Groups nest at most 256 deep ("too complex").
absl::StatusOr<ParsedRegex> ParseRegex(std::string_view pattern);

// Length bounds of a node's texts in code points; max < 0: unbounded.
void RegexLengthBounds(const RegexNode& node, int64_t& min, int64_t& max);

// The node's texts whose length lies in [lo, hi] (hi < 0: unbounded), as a node, when that is
// a matter of repetition counts: the node's lengths already fit, or one repetition of a
// fixed-length part (inside sequences of fixed-length parts and alternatives) takes the
// slack. nullopt otherwise. A node that matches nothing is a class with no members.
std::optional<RegexNode> ConstrainLength(const RegexNode& node, int64_t lo, int64_t hi);

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_REGEX_PARSER_H_
