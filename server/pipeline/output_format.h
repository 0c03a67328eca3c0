// What a request's output must be (response_format and its equivalents in every API), as the
// front ends hand it to the pipeline, and its grammar. Structured output is enforced token by
// token (engine/constraint); a schema keyword that cannot be enforced is an error naming it,
// never ignored.
#ifndef TEXTGEN_SERVER_PIPELINE_OUTPUT_FORMAT_H_
#define TEXTGEN_SERVER_PIPELINE_OUTPUT_FORMAT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace textgen::server {

struct OutputFormat {
  enum class Kind {
    kText,        // free text
    kJsonObject,  // any JSON object
    kJsonSchema,  // one JSON text valid under `schema`
    kRegex,       // the whole output matches `text` (ECMA-262 subset)
    kChoice,      // exactly one of `choices`
    kGrammar,     // a sentence of the GBNF grammar `text` (root rule "root")
  };
  Kind kind = Kind::kText;
  nlohmann::ordered_json schema;
  std::string text;
  std::vector<std::string> choices;
  // Where the client gave it, for error messages (e.g. "response_format.json_schema.schema").
  std::string field = "response_format";
};

// The GBNF whose root rule accepts exactly the allowed outputs; nullopt for kText.
// InvalidArgument naming `format.field` and, for schemas, the keyword and its JSON pointer
// ("response_format.json_schema.schema: unsupported JSON Schema keyword \"multipleOf\" at
// /properties/price"); "too complex" for schemas that would explode (refused within 1 s).
absl::StatusOr<std::optional<std::string>> OutputFormatGbnf(const OutputFormat& format);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PIPELINE_OUTPUT_FORMAT_H_
