#include "server/pipeline/output_format.h"

#include "absl/strings/str_cat.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"

namespace textgen::server {
namespace {

// The converter's message under the client's field name.
absl::Status UnderField(const absl::Status& st, const std::string& field) {
  return absl::Status(st.code(), absl::StrCat(field, ": ", st.message()));
}

}  // namespace

absl::StatusOr<std::optional<std::string>> OutputFormatGbnf(const OutputFormat& format) {
  absl::StatusOr<std::string> gbnf;
  switch (format.kind) {
    case OutputFormat::Kind::kText:
      return std::nullopt;
    case OutputFormat::Kind::kJsonObject:
      return JsonObjectGbnf();
    case OutputFormat::Kind::kJsonSchema:
      gbnf = JsonSchemaToGbnf(format.schema);
      break;
    case OutputFormat::Kind::kRegex:
      gbnf = RegexToGbnf(format.text);
      break;
    case OutputFormat::Kind::kChoice:
      if (format.choices.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(format.field, ": needs at least one choice"));
      }
      return ChoiceToGbnf(format.choices);
    case OutputFormat::Kind::kGrammar:
      // Parsed (with line:column errors) when it is compiled.
      return format.text;
  }
  if (!gbnf.ok()) return UnderField(gbnf.status(), format.field);
  return *std::move(gbnf);
}

}  // namespace textgen::server
