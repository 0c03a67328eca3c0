// GBNF text -> rule expressions (the syntax tree GrammarBuilder compiles). The syntax is
// llama.cpp's (src/llama-grammar.cpp), so grammars written for llama.cpp parse unchanged:
//
//   name ::= alternatives        names are [a-zA-Z0-9_-]+; a rule ends at a newline (or the end)
//   a b c        sequence        a | b   alternatives (a newline may follow `|` and `::=`)
//   ( ... )      group           newlines are free inside parentheses
//   "text"       literal         escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_]    character class [^...] negated; the same escapes; `-` first or last is literal
//   .            any character (one code point)
//   x* x+ x?     repetition      x{m} x{m,} x{m,n} (spaces allowed inside the braces)
//   <[123]>      token 123       <|im_end|>: the token whose text this is; !<[123]> !<|..|>: any
//                                single token except that one
//   # comment    to the end of the line
//
// \xHH, \u and \U name code points (as in llama.cpp: "\xe9" is "é", two bytes in UTF-8). A rule
// defined twice keeps its last definition (as llama.cpp does).
#ifndef TEXTGEN_ENGINE_GRAMMAR_GBNF_PARSER_H_
#define TEXTGEN_ENGINE_GRAMMAR_GBNF_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"

namespace textgen::gbnf {

struct Expr {
  enum class Kind : uint8_t {
    kSeq,      // children in order (empty: matches the empty string)
    kAlt,      // one of children
    kLiteral,  // bytes (UTF-8)
    kClass,    // one code point in ranges (negated: not in them); `.` is the full range
    kRuleRef,  // rule
    kToken,    // token_ref (negated: any other token)
    kRepeat,   // children[0] between min and max times (max == kUnbounded: no limit)
  };
  static constexpr uint32_t kUnbounded = 0xFFFFFFFFu;

  Kind kind = Kind::kSeq;
  std::vector<Expr> children;
  std::string bytes;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
  bool negated = false;
  int32_t rule = -1;
  int32_t token_ref = -1;
  uint32_t min = 0, max = 0;
};

struct ParsedGrammar {
  std::vector<std::string> names;  // rule id -> name
  std::vector<Expr> bodies;        // rule id -> body (kAlt)
  std::vector<bool> defined;       // referenced names may be undefined
  std::vector<size_t> first_use;   // rule id -> offset of its first mention
  std::string_view text;           // the source (for LineColumn)

  // 1-based line and column (in bytes) of `offset` in text.
  std::pair<int, int> LineColumn(size_t offset) const;
  std::vector<Grammar::TokenRef> token_refs;
};

// Syntax only: undefined rules and the root are checked by the caller. InvalidArgument
// "line:column: message"; "grammar too complex: ..." for the input, nesting and literal limits.
absl::StatusOr<ParsedGrammar> Parse(std::string_view text, const GrammarLimits& limits);

}  // namespace textgen::gbnf

#endif  // TEXTGEN_ENGINE_GRAMMAR_GBNF_PARSER_H_
