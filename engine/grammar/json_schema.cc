#include "engine/grammar/json_schema.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema_converter.h"
#include "engine/grammar/json_schema_ir.h"
#include "engine/grammar/json_schema_pieces.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

using json_schema_internal::GbnfBuilder;

// Deeper documents are refused before anything recurses over them.
constexpr int kMaxJsonNesting = 512;

absl::Status CheckOptions(const JsonSchemaOptions& o) {
  const auto bad = [](const char* field) {
    return absl::InvalidArgumentError(absl::StrCat("JsonSchemaOptions.", field, " out of range"));
  };
  if (o.max_indent < 0 || o.max_indent > 1000) return bad("max_indent");
  if (o.max_integer_digits < 1 || o.max_integer_digits > 64) return bad("max_integer_digits");
  if (o.max_fraction_digits < 0 || o.max_fraction_digits > 64) return bad("max_fraction_digits");
  if (o.max_exponent_digits < 0 || o.max_exponent_digits > 4) return bad("max_exponent_digits");
  if (o.max_rules < 1 || o.max_size < 1 || o.max_enum_values < 1 || o.max_depth < 1) {
    return bad("limits");
  }
  return absl::OkStatus();
}

// Without recursion: nlohmann's conversions and our converter recurse per level.
template <typename J>
absl::Status CheckNesting(const J& doc) {
  std::vector<std::pair<const J*, int>> stack = {{&doc, 0}};
  while (!stack.empty()) {
    auto [j, depth] = stack.back();
    stack.pop_back();
    if (depth > kMaxJsonNesting) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema too complex: JSON nested deeper than ", kMaxJsonNesting, " levels"));
    }
    if (j->is_structured()) {
      for (const auto& item : *j) stack.emplace_back(&item, depth + 1);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> GrammarAccepts(const std::string& gbnf, const std::string& text) {
  auto grammar = ParseGbnf(gbnf);
  if (!grammar.ok()) {
    return absl::InternalError(
        absl::StrCat("JSON Schema conversion made a grammar that does not "
                     "parse: ",
                     grammar.status().message()));
  }
  GrammarMatcher matcher(*grammar);
  return matcher.AcceptString(text) && matcher.CanEnd();
}

}  // namespace

absl::StatusOr<JsonSchemaGrammar> ConvertJsonSchema(const nlohmann::ordered_json& schema,
                                                    std::string_view root_name,
                                                    const JsonSchemaOptions& options) {
  TG_RETURN_IF_ERROR(CheckOptions(options));
  if (!json_schema_internal::IsGbnfName(root_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid grammar rule name \"", std::string(root_name), "\""));
  }
  TG_RETURN_IF_ERROR(CheckNesting(schema));
  json_schema_internal::SchemaConverter converter(schema, std::string(root_name), options,
                                                  absl::Now() + options.time_limit, GrammarAccepts);
  try {
    return converter.Run();
  } catch (const nlohmann::json::exception& e) {  // a keyword of a type the checks missed
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON Schema: ", e.what()));
  } catch (const std::exception& e) {  // a bug: never take the server down for it
    return absl::InternalError(absl::StrCat("JSON Schema conversion failed: ", e.what()));
  }
}

absl::StatusOr<std::string> JsonSchemaToGbnfRules(const nlohmann::ordered_json& schema,
                                                  std::string_view root_name,
                                                  const JsonSchemaOptions& options) {
  TG_ASSIGN_OR_RETURN(JsonSchemaGrammar g, ConvertJsonSchema(schema, root_name, options));
  return std::move(g.gbnf);
}

absl::StatusOr<std::string> JsonSchemaToGbnfRules(const nlohmann::json& schema,
                                                  std::string_view root_name,
                                                  const JsonSchemaOptions& options) {
  TG_RETURN_IF_ERROR(CheckNesting(schema));
  return JsonSchemaToGbnfRules(nlohmann::ordered_json(schema), root_name, options);
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options) {
  return JsonSchemaToGbnfRules(schema, "root", options);
}

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema,
                                             const JsonSchemaOptions& options) {
  return JsonSchemaToGbnfRules(schema, "root", options);
}

std::string JsonObjectGbnf() {
  static const std::string* text = [] {
    const JsonSchemaOptions options;
    GbnfBuilder b("root", {});
    json_schema_internal::JsonPieces pieces(b, options);
    b.Define(GbnfBuilder::kRoot, pieces.Object());
    return new std::string(b.Finish("unreachable: an object grammar is never empty")->text);
  }();
  return *text;
}

std::string ChoiceToGbnf(const std::vector<std::string>& choices) {
  GbnfBuilder b("root", {INT64_MAX, INT64_MAX, absl::InfiniteFuture()});
  std::vector<GbnfBuilder::Expr> alts;
  for (const std::string& c : choices) alts.push_back(b.Literal(c));
  b.Define(GbnfBuilder::kRoot, b.Alt(std::move(alts)));
  auto g = b.Finish("no choices");
  if (!g.ok()) return "root ::= [^\\x00-\\U0010FFFF]\n";  // nothing matches the empty class
  return g->text;
}

}  // namespace textgen
