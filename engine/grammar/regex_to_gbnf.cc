#include "engine/grammar/regex_to_gbnf.h"

#include "absl/strings/str_cat.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_ir.h"
#include "engine/grammar/json_schema_pieces.h"
#include "engine/grammar/regex_parser.h"
#include "engine/util/status_macros.h"

namespace textgen {

absl::StatusOr<std::string> RegexToGbnfRules(std::string_view pattern, std::string_view root_name) {
  using namespace json_schema_internal;  // NOLINT: the converter's internals
  if (!IsGbnfName(root_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid grammar rule name \"", std::string(root_name), "\""));
  }
  TG_ASSIGN_OR_RETURN(ParsedRegex regex, ParseRegex(pattern));
  const JsonSchemaOptions options;
  GbnfBuilder b(std::string(root_name),
                BuildLimits{options.max_rules, options.max_size, absl::Now() + options.time_limit});
  JsonPieces pieces(b, options);
  b.Define(GbnfBuilder::kRoot, pieces.RegexPlain(regex));
  TG_ASSIGN_OR_RETURN(GbnfGrammar g, b.Finish("the regex matches no text"));
  return g.text;
}

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern) {
  return RegexToGbnfRules(pattern, "root");
}

}  // namespace textgen
