// The JSON building blocks shared by one grammar: whitespace, string units, the generic value
// (for `true` schemas and json_object), numbers without bounds, and the `format` grammars.
// Each is one rule, made on first use.
#ifndef TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_PIECES_H_
#define TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_PIECES_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_ir.h"
#include "engine/grammar/regex_charset.h"
#include "engine/grammar/regex_parser.h"

namespace textgen::json_schema_internal {

using Expr = GbnfBuilder::Expr;

// Not thread-safe; lives as long as its builder.
class JsonPieces {
 public:
  JsonPieces(GbnfBuilder& b, const JsonSchemaOptions& options) : b_(b), options_(options) {}

  GbnfBuilder& builder() { return b_; }
  const JsonSchemaOptions& options() const { return options_; }

  Expr Ws();         // between tokens
  Expr AnyChar();    // one code point in any JSON spelling (raw, short escape, \uXXXX)
  Expr KeyChar();    // one code point in its one canonical spelling
  Expr AnyString();  // "..." with any content
  Expr Integer();    // no bounds
  Expr Number();     // no bounds, with an optional exponent
  Expr Boolean();
  Expr Null();
  Expr Value();   // any JSON value
  Expr Object();  // any JSON object
  Expr Array();   // any JSON array

  // One code point of `set` in its canonical JSON string spelling (Never if the set is empty).
  Expr Units(const CodePointSet& set);
  // The string content (between the quotes) whose decoded text matches `regex` with
  // JSON Schema's search semantics (a match anywhere, unless anchored).
  Expr PatternContent(const ParsedRegex& regex);
  // The regex's texts (whole-text match) as raw characters, for RegexToGbnf.
  Expr RegexPlain(const ParsedRegex& regex);

  // The supported `format` names, and a format's grammar (the content between the quotes;
  // every format's texts are printable ASCII without " or \). Never for an unknown name.
  static bool IsKnownFormat(std::string_view name);
  Expr Format(std::string_view name);

 private:
  Expr Shared(std::string_view name, Expr (JsonPieces::*build)());
  Expr BuildWs();
  Expr BuildAnyChar();
  Expr BuildKeyChar();
  Expr BuildAnyString();
  Expr BuildInteger();
  Expr BuildNumber();
  Expr BuildValue();
  Expr BuildObject();
  Expr BuildArray();
  Expr RegexNodeExpr(const RegexNode& node, bool json);
  static const CodePointSet& EscapedChars();  // ", \ and the controls
  Expr BuildUnits(const CodePointSet& set);
  Expr AllEscapes();
  Expr BuildAllEscapes();
  Expr Escapes(const CodePointSet& set);
  // formats (json_schema_formats.cc)
  Expr BuildDate();
  Expr BuildTime();
  Expr BuildDateTime();
  Expr BuildUuid();
  Expr BuildIpv4();
  Expr BuildIpv6();
  Expr BuildHostname();
  Expr BuildEmail();
  Expr Digit(char lo = '0', char hi = '9');
  Expr HexDigit();

  GbnfBuilder& b_;
  const JsonSchemaOptions& options_;
  absl::flat_hash_map<std::string, Expr> shared_;  // name -> reference to its rule
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, Expr> units_;  // Units by set
};

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_PIECES_H_
