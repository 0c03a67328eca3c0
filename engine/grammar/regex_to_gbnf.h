// Regular expression -> GBNF, for clients' regex constraints (vLLM's guided_regex and the
// like): the grammar of the texts the whole of which the pattern matches. The dialect is the
// one regex_parser.h describes (an ECMA-262 subset; unsupported features are refused by name).
#ifndef TEXTGEN_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_
#define TEXTGEN_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace textgen {

// GBNF whose `root` accepts exactly the texts `pattern` matches entirely (`^` and `$` at the
// ends are allowed and change nothing). InvalidArgument for a pattern that does not parse, an
// unsupported feature (named, with its offset), one that matches nothing, or one too complex
// (more than 5000 rules or 200000 grammar elements, or 500 ms of work).
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern);
// The same as rules to embed in a larger grammar: the top rule is `root_name`, the others
// start with `root_name` + "-".
absl::StatusOr<std::string> RegexToGbnfRules(std::string_view pattern, std::string_view root_name);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_
