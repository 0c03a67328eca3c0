// JSON Schema -> GBNF: the grammar whose texts are exactly the JSON documents a schema accepts
// (within the bounds below), for constrained decoding of `response_format` and tool calls.
// Also the grammars of OpenAI's `json_object` and of a choice among fixed strings.
//
// The supported subset (each keyword is enforced exactly or refused; annotations are ignored):
//   type (a name or a list, incl. null), enum, const, anyOf, oneOf (when its branches are
//   provably exclusive), allOf (merged: the conjunction of its schemas), $ref to "#..." JSON
//   pointers into the document incl. recursion ($defs, definitions), properties, required,
//   additionalProperties (false, true or a schema; absent means true), propertyNames,
//   minProperties / maxProperties, items, prefixItems (and draft-07's items array with
//   additionalItems), minItems / maxItems, minLength / maxLength (code points), pattern (see
//   regex_parser.h), format (date, time, date-time, email, uuid, ipv4, ipv6, hostname), minimum /
//   maximum / exclusiveMinimum / exclusiveMaximum (numbers; draft-04's boolean exclusives too)
//   for integer and number. Booleans are schemas (true: anything, false: nothing).
// Refused with InvalidArgument `unsupported JSON Schema keyword "K" at /pointer`: multipleOf,
//   uniqueItems (unless false), not, if / then / else, dependentRequired, dependentSchemas,
//   dependencies, patternProperties, contains / minContains / maxContains,
//   unevaluatedProperties / unevaluatedItems, contentEncoding / contentMediaType /
//   contentSchema, $dynamicRef, $recursiveRef, unknown formats. Keywords outside the JSON
//   Schema vocabularies (vendor extensions such as OpenAPI's "nullable" or "discriminator")
//   are ignored, as validators ignore them.
//
// What the grammar emits, so that every output is finite for a bounded schema:
//   - Property order: declared properties in the order of `properties` (as the schema's JSON
//     object iterates: nlohmann::json sorts keys, nlohmann::ordered_json keeps the client's
//     order; parse requests with ordered_json), each required one always, each optional one
//     skippable; then required properties that `properties` does not declare, in `required`
//     order; then additional properties (any number, allowed by additionalProperties and
//     propertyNames, never a declared name). allOf merges keep the first schema's order.
//   - Whitespace: after every structural token, nothing, one space, or a newline and up to
//     `max_indent` spaces or tabs (none at the start or end of the document).
//   - Numbers: at most `max_integer_digits` digits before the point (more only if a bound
//     needs them), at most `max_fraction_digits` after it; an exponent (at most
//     `max_exponent_digits` digits) only when the schema has no numeric bounds. With bounds
//     the grammar accepts exactly the decimals in range (bounds rounded inwards to the
//     fraction digits; exclusive float bounds to the next representable double, so that
//     validators comparing doubles agree). Integers never have a fraction or exponent.
//   - Strings: escapes other than \uD800-\uDFFF (so that every escape is one code point);
//     names of additional properties and strings under `pattern` use one spelling per
//     character (raw, or the short escape / \u00XX for the characters JSON requires escaped).
//     `pattern` has JSON Schema's search semantics (a match anywhere unless anchored); its
//     classes mean what both ECMA-262 and Python's `re` agree on (regex_parser.h).
//     minLength / maxLength beside a pattern: when the pattern's texts already fit, or when it
//     is anchored (^...$) and one repetition in it can take the length (^[a-z0-9_]+$,
//     ^(?:[A-Z]{2}-)?\d+$); otherwise refused.
//   - Additional properties: a grammar cannot keep their names distinct from each other (it
//     keeps them distinct from the declared ones), so minProperties never relies on more than
//     one of them (a schema that needs two or more is refused).
//   - Counts (lengths, items, properties) above 16,000,000 are unbounded; minima above
//     4,000,000 are too complex.
//   - $ref: "#" and "#/json/pointer" (percent-decoded), also prefixed with the root's $id;
//     an $id inside the document does not change how references resolve.
//   - `format` grammars: RFC 3339 date (real calendar dates, years 0001-9999), time
//     (HH:MM:SS[.fraction of 1-9 digits] then Z or +HH:MM / -HH:MM; seconds 00-59), date-time
//     (date "T" time), uuid (8-4-4-4-12 hex), ipv4 (dotted decimal, no leading zeros), ipv6
//     (RFC 4291 hex forms with :: compression, no embedded IPv4), hostname (RFC 1123, at most
//     4 labels of at most 62 characters), email (dot-atom local part of at most 4 atoms,
//     hostname domain).
// Limits: a schema that would need more than `max_rules` rules or `max_size` grammar elements
// (repetition counts multiply), an enum of more than `max_enum_values` values, nesting deeper
// than `max_depth`, or more than `time_limit` of work is refused with InvalidArgument
// "schema too complex: ...". Invalid schemas (a keyword of the wrong type, minItems >
// maxItems, a dangling $ref, an empty enum, a pattern that does not parse, ...) are
// InvalidArgument naming the keyword and its JSON pointer. Thread-safe: no shared state.
#ifndef TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_H_
#define TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace textgen {

struct JsonSchemaOptions {
  bool allow_whitespace = true;  // false: compact JSON only
  int max_indent = 20;           // [ \t] after a newline between tokens
  int max_integer_digits = 16;   // 1..64
  int max_fraction_digits = 16;  // 0..64 (0: no fractions)
  int max_exponent_digits = 2;   // 0..4 (0: no exponents)
  int max_rules = 5000;          // the engine's own limit (20000) also counts groups it creates
  int64_t max_size = 200000;     // about automaton nodes (the engine's limit is 500000)
  int max_enum_values = 4096;
  int max_depth = 128;  // nested subschemas being converted at once (and JSON nesting)
  // Real schemas convert in a few milliseconds; this bounds pathological ones (well under a
  // second with the engine's parse and compile).
  absl::Duration time_limit = absl::Milliseconds(500);
};

// GBNF text whose `root` rule accepts exactly the JSON texts valid under `schema` (the
// supported subset, within the bounds above).
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema,
                                             const JsonSchemaOptions& options = {});
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options = {});

// The same as rules to embed in a larger grammar (tool calls): the top rule is named
// `root_name`, every other rule name it defines starts with `root_name` followed by "-" (so
// several schemas combine). `root_name` must be a GBNF name ([A-Za-z0-9-]+).
absl::StatusOr<std::string> JsonSchemaToGbnfRules(const nlohmann::json& schema,
                                                  std::string_view root_name,
                                                  const JsonSchemaOptions& options = {});
absl::StatusOr<std::string> JsonSchemaToGbnfRules(const nlohmann::ordered_json& schema,
                                                  std::string_view root_name,
                                                  const JsonSchemaOptions& options = {});

// The grammar and what the tests and benchmarks measure about it.
struct JsonSchemaGrammar {
  std::string gbnf;
  // The longest accepted text in UTF-8 bytes; nullopt when unbounded (an unbounded string,
  // array, object or recursion).
  std::optional<int64_t> max_bytes;
  int rules = 0;
};
absl::StatusOr<JsonSchemaGrammar> ConvertJsonSchema(const nlohmann::ordered_json& schema,
                                                    std::string_view root_name,
                                                    const JsonSchemaOptions& options = {});

// OpenAI's response_format {"type": "json_object"}: any JSON object, with the whitespace and
// number bounds of JsonSchemaOptions' defaults (strings, arrays and nesting unbounded).
std::string JsonObjectGbnf();

// Exactly one of `choices` (the texts themselves, not JSON). An empty list gives a grammar
// that accepts nothing; callers should refuse empty lists first.
std::string ChoiceToGbnf(const std::vector<std::string>& choices);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_H_
