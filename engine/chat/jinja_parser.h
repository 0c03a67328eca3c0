// Lexer and parser for the Jinja subset chat templates use, with the whitespace rules Hugging
// Face renders with: trim_blocks, lstrip_blocks, `-`/`+` markers, and one trailing newline of
// the source dropped (keep_trailing_newline=False).
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_PARSER_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_PARSER_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/chat/jinja_ast.h"

namespace textgen::jinja {

// The token stream of `source`; InvalidArgument for an unterminated tag or string.
absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

// The statements of `source`; InvalidArgument naming the line and the construct for a syntax
// error or a statement this interpreter does not support (include, import, extends, ...).
absl::StatusOr<Body> Parse(std::string_view source);

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_PARSER_H_
