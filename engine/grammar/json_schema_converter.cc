#include "engine/grammar/json_schema_converter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/regex_parser.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

// Keywords that only annotate (or hold subschemas used elsewhere): ignored.
const absl::flat_hash_set<std::string>& Ignored() {
  static const auto* set = new absl::flat_hash_set<std::string>{
      "title",     "description", "default",        "examples",         "$schema",
      "$id",       "id",          "$comment",       "deprecated",       "readOnly",
      "writeOnly", "$anchor",     "$dynamicAnchor", "$recursiveAnchor", "$vocabulary",
      "$defs",     "definitions"};
  return *set;
}
// JSON Schema keywords that constrain and are not supported.
const absl::flat_hash_set<std::string>& Refused() {
  static const auto* set = new absl::flat_hash_set<std::string>{"multipleOf",
                                                                "not",
                                                                "if",
                                                                "then",
                                                                "else",
                                                                "dependentRequired",
                                                                "dependentSchemas",
                                                                "dependencies",
                                                                "patternProperties",
                                                                "contains",
                                                                "minContains",
                                                                "maxContains",
                                                                "unevaluatedProperties",
                                                                "unevaluatedItems",
                                                                "contentEncoding",
                                                                "contentMediaType",
                                                                "contentSchema",
                                                                "$dynamicRef",
                                                                "$recursiveRef"};
  return *set;
}
std::string Child(const std::string& ptr, size_t index) {
  return ptr + "/" + std::to_string(index);
}

absl::Status Invalid(std::string_view what, std::string_view ptr) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid JSON Schema: ", std::string(what), " at ", PointerForMessage(ptr)));
}
absl::Status UnsupportedKeyword(std::string_view keyword, std::string_view ptr) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported JSON Schema keyword \"",
                                                 std::string(keyword), "\" at ",
                                                 PointerForMessage(ptr)));
}

}  // namespace

bool IsNonNegativeInteger(const Json& v) {
  if (v.is_number_unsigned()) return true;
  if (v.is_number_integer()) return v.get<int64_t>() >= 0;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && d >= 0 && d == std::floor(d);
  }
  return false;
}
int64_t AsCount(const Json& v) {
  if (v.is_number_float()) return static_cast<int64_t>(std::min(v.get<double>(), 9e18));
  if (v.is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
  return v.get<int64_t>();
}

uint8_t TypeBitsOfName(const std::string& name) {
  if (name == "null") return kNull;
  if (name == "boolean") return kBoolean;
  if (name == "object") return kObject;
  if (name == "array") return kArray;
  if (name == "string") return kString;
  if (name == "integer") return kInteger;
  if (name == "number") return kInteger | kNumber;
  return 0;
}

uint8_t TypeMask(const Json& type) {
  if (type.is_string()) return TypeBitsOfName(type.get<std::string>());
  uint8_t mask = 0;
  for (const Json& t : type) mask |= TypeBitsOfName(t.get<std::string>());
  return mask;
}

bool ValueConstraintKeyword(std::string_view key) {
  static const auto* set = new absl::flat_hash_set<std::string>{"properties",
                                                                "required",
                                                                "additionalProperties",
                                                                "propertyNames",
                                                                "minProperties",
                                                                "maxProperties",
                                                                "items",
                                                                "prefixItems",
                                                                "additionalItems",
                                                                "minItems",
                                                                "maxItems",
                                                                "minLength",
                                                                "maxLength",
                                                                "pattern",
                                                                "format",
                                                                "minimum",
                                                                "maximum",
                                                                "exclusiveMinimum",
                                                                "exclusiveMaximum",
                                                                "anyOf",
                                                                "oneOf"};
  return set->contains(std::string(key));
}

std::string PointerChild(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}
std::string PointerForMessage(std::string_view pointer) {
  return pointer.empty() ? "the root" : std::string(pointer);
}

uint8_t TypeBitsOfValue(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return kNull;
    case Json::value_t::boolean:
      return kBoolean;
    case Json::value_t::string:
      return kString;
    case Json::value_t::array:
      return kArray;
    case Json::value_t::object:
      return kObject;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kInteger;
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      return std::isfinite(d) && d == std::floor(d) ? kInteger : kNumber;
    }
    default:
      return 0;
  }
}

absl::StatusOr<std::string> CanonicalJson(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (!std::isfinite(d)) return absl::InvalidArgumentError("a number that is not finite");
      char buf[64];
      if (d == std::floor(d) && std::fabs(d) < 9007199254740992.0) {
        return std::to_string(static_cast<int64_t>(d));
      }
      auto r = std::to_chars(buf, buf + sizeof(buf), d);
      return std::string(buf, r.ptr);
    }
    case Json::value_t::string:
      try {
        return value.dump();
      } catch (const nlohmann::json::exception&) {
        return absl::InvalidArgumentError("a string that is not valid UTF-8");
      }
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) {
        TG_ASSIGN_OR_RETURN(std::string item, CanonicalJson(value[i]));
        absl::StrAppend(&out, i > 0 ? "," : "", item);
      }
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        TG_ASSIGN_OR_RETURN(std::string k, CanonicalJson(Json(key)));
        TG_ASSIGN_OR_RETURN(std::string v, CanonicalJson(item));
        absl::StrAppend(&out, first ? "" : ",", k, ":", v);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

SchemaConverter::SchemaConverter(const Json& doc, std::string root_name,
                                 const JsonSchemaOptions& options, absl::Time deadline,
                                 GrammarAcceptsFn accepts, int nesting)
    : doc_(doc),
      root_name_(root_name),
      options_(options),
      deadline_(deadline),
      accepts_(std::move(accepts)),
      nesting_(nesting),
      b_(std::move(root_name), BuildLimits{options.max_rules, options.max_size, deadline}),
      pieces_(b_, options_) {}

absl::StatusOr<const Json*> SchemaConverter::At(const std::string& ptr) const {
  try {
    return &doc_.at(Json::json_pointer(ptr));
  } catch (const nlohmann::json::exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON Schema: no schema at ", PointerForMessage(ptr)));
  }
}

absl::Status SchemaConverter::CheckKeywords(const std::string& ptr) {
  if (schemas_.contains(ptr)) return absl::OkStatus();
  TG_ASSIGN_OR_RETURN(const Json* schema, At(ptr));
  schemas_[ptr] = schema;
  if (schema->is_boolean()) return absl::OkStatus();
  if (!schema->is_object()) return Invalid("a schema must be an object or a boolean", ptr);
  const auto count = [&](const char* key, int64_t& out) -> absl::Status {
    out = -1;
    auto it = schema->find(key);
    if (it == schema->end()) return absl::OkStatus();
    if (!IsNonNegativeInteger(*it)) {
      return Invalid(absl::StrCat("\"", key, "\" must be a non-negative integer"), ptr);
    }
    out = AsCount(*it);
    return absl::OkStatus();
  };
  for (const auto& item : schema->items()) {
    // Named references, not a structured binding: clang 14 (the fuzz build) cannot capture a
    // binding in the lambdas below.
    const std::string& key = item.key();
    const Json& value = item.value();
    if (Ignored().contains(key)) {
      if ((key == "$defs" || key == "definitions") && !value.is_object()) {
        return Invalid(absl::StrCat("\"", key, "\" must be an object"), ptr);
      }
      continue;
    }
    if (Refused().contains(key)) return UnsupportedKeyword(key, ptr);
    const auto must = [&](bool ok, std::string_view what) {
      return ok ? absl::OkStatus()
                : Invalid(absl::StrCat("\"", key, "\" must be ", std::string(what)), ptr);
    };
    const bool schema_like = value.is_object() || value.is_boolean();
    if (key == "type") {
      const auto valid_name = [](const Json& t) {
        return t.is_string() && TypeBitsOfName(t.get<std::string>()) != 0;
      };
      bool ok = valid_name(value);
      if (value.is_array() && !value.empty()) {
        ok = std::all_of(value.begin(), value.end(), valid_name);
        for (size_t i = 0; ok && i < value.size(); ++i) {
          for (size_t j = 0; j < i; ++j) ok = ok && value[i] != value[j];
        }
      }
      TG_RETURN_IF_ERROR(must(ok,
                              "a type name (null, boolean, object, array, string, "
                              "integer, number) or a list of distinct ones"));
    } else if (key == "enum") {
      TG_RETURN_IF_ERROR(must(value.is_array() && !value.empty(), "a non-empty array"));
      if (static_cast<int64_t>(value.size()) > options_.max_enum_values) {
        return absl::InvalidArgumentError(
            absl::StrCat("schema too complex: \"enum\" at ", PointerForMessage(ptr), " has ",
                         value.size(), " values (at most ", options_.max_enum_values, ")"));
      }
    } else if (key == "anyOf" || key == "oneOf" || key == "allOf" || key == "prefixItems") {
      TG_RETURN_IF_ERROR(must(value.is_array() && !value.empty(), "a non-empty array of schemas"));
    } else if (key == "$ref") {
      TG_RETURN_IF_ERROR(must(value.is_string(), "a string"));
    } else if (key == "properties") {
      TG_RETURN_IF_ERROR(must(value.is_object(), "an object of schemas"));
    } else if (key == "required") {
      bool ok = value.is_array();
      absl::flat_hash_set<std::string> seen;
      for (size_t i = 0; ok && i < value.size(); ++i) {
        ok = value[i].is_string() && seen.insert(value[i].get<std::string>()).second;
      }
      TG_RETURN_IF_ERROR(must(ok, "an array of distinct strings"));
    } else if (key == "additionalProperties" || key == "propertyNames" ||
               key == "additionalItems") {
      TG_RETURN_IF_ERROR(must(schema_like, "a schema"));
    } else if (key == "items") {
      TG_RETURN_IF_ERROR(must(schema_like || value.is_array(), "a schema"));
    } else if (key == "pattern") {
      TG_RETURN_IF_ERROR(must(value.is_string(), "a string"));
      auto parsed = ParseRegex(value.get<std::string>());
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("\"pattern\" at ", PointerForMessage(ptr),
                                                       ": ", parsed.status().message()));
      }
    } else if (key == "format") {
      TG_RETURN_IF_ERROR(must(value.is_string(), "a string"));
      if (!JsonPieces::IsKnownFormat(value.get<std::string>())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unsupported JSON Schema keyword \"format\" at ", PointerForMessage(ptr),
            ": unknown format \"", value.get<std::string>(),
            "\" (supported: date, time, date-time, email, uuid, ipv4, ipv6, hostname)"));
      }
    } else if (key == "minimum" || key == "maximum") {
      TG_RETURN_IF_ERROR(
          must(value.is_number() && std::isfinite(value.get<double>()), "a finite number"));
    } else if (key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      TG_RETURN_IF_ERROR(
          must(value.is_boolean() || (value.is_number() && std::isfinite(value.get<double>())),
               "a finite number"));
    } else if (key == "uniqueItems") {
      TG_RETURN_IF_ERROR(must(value.is_boolean(), "a boolean"));
      if (value.get<bool>()) return UnsupportedKeyword(key, ptr);
    }
  }
  int64_t lo, hi;
  for (auto [min_key, max_key] :
       {std::pair{"minLength", "maxLength"}, std::pair{"minItems", "maxItems"},
        std::pair{"minProperties", "maxProperties"}}) {
    TG_RETURN_IF_ERROR(count(min_key, lo));
    TG_RETURN_IF_ERROR(count(max_key, hi));
    if (lo >= 0 && hi >= 0 && lo > hi) {
      return Invalid(absl::StrCat("\"", min_key, "\" is greater than \"", max_key, "\""), ptr);
    }
  }
  auto min_it = schema->find("minimum"), max_it = schema->find("maximum");
  if (min_it != schema->end() && max_it != schema->end() &&
      min_it->get<double>() > max_it->get<double>()) {
    return Invalid("\"minimum\" is greater than \"maximum\"", ptr);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SchemaConverter::ResolveRef(const std::string& ptr,
                                                        const Json& ref) const {
  std::string target = ref.get<std::string>();
  auto id = doc_.is_object() ? doc_.find("$id") : doc_.end();
  if (doc_.is_object() && id != doc_.end() && id->is_string()) {
    std::string base = id->get<std::string>();
    if (!base.empty() && base.back() == '#') base.pop_back();
    if (!base.empty() && target.compare(0, base.size(), base) == 0) target.erase(0, base.size());
  }
  if (target.empty() || target[0] != '#') {
    return absl::InvalidArgumentError(absl::StrCat("unsupported JSON Schema keyword \"$ref\" at ",
                                                   PointerForMessage(ptr), ": remote reference \"",
                                                   ref.get<std::string>(), "\""));
  }
  if (target.size() > 1 && target[1] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported JSON Schema keyword \"$ref\" at ", PointerForMessage(ptr),
                     ": reference to an anchor \"", ref.get<std::string>(), "\""));
  }
  // A URI fragment: percent-decoded, it is a JSON pointer.
  std::string pointer;
  for (size_t i = 1; i < target.size(); ++i) {
    const auto hex = [](char c) {
      return (c >= '0' && c <= '9')   ? c - '0'
             : (c >= 'a' && c <= 'f') ? c - 'a' + 10
             : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                      : -1;
    };
    if (target[i] == '%' && i + 2 < target.size() + 0 && hex(target[i + 1]) >= 0 &&
        hex(target[i + 2]) >= 0) {
      pointer += static_cast<char>(hex(target[i + 1]) * 16 + hex(target[i + 2]));
      i += 2;
    } else {
      pointer += target[i];
    }
  }
  try {
    if (!doc_.contains(Json::json_pointer(pointer))) {
      return Invalid(absl::StrCat("dangling $ref \"", ref.get<std::string>(), "\""), ptr);
    }
  } catch (const nlohmann::json::exception&) {
    return Invalid(absl::StrCat("malformed $ref \"", ref.get<std::string>(), "\""), ptr);
  }
  return pointer;
}

absl::Status SchemaConverter::FlattenInto(const std::string& ptr, Conj& conj,
                                          std::vector<std::string>& chain,
                                          absl::flat_hash_set<std::string>& visited) {
  if (std::find(chain.begin(), chain.end(), ptr) != chain.end()) {
    return Invalid("circular $ref or allOf (a schema that is its own conjunct)", ptr);
  }
  if (static_cast<int>(chain.size()) > options_.max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema too complex: $ref / allOf chains deeper than ", options_.max_depth,
                     " at ", PointerForMessage(ptr)));
  }
  if (!visited.insert(ptr).second) return absl::OkStatus();
  TG_RETURN_IF_ERROR(b_.CheckDeadline());
  TG_RETURN_IF_ERROR(CheckKeywords(ptr));
  TG_ASSIGN_OR_RETURN(const Json* schema, At(ptr));
  if (schema->is_boolean()) {
    if (!schema->get<bool>()) conj.never = true;
    return absl::OkStatus();
  }
  // A schema of nothing but $ref / allOf and annotations adds no part of its own, so that
  // conjunctions reached through different references are one rule.
  const bool trivial =
      std::all_of(schema->items().begin(), schema->items().end(), [](const auto& kv) {
        return kv.key() == "$ref" || kv.key() == "allOf" || Ignored().contains(kv.key());
      });
  if (!trivial) conj.parts.push_back(Part{ptr, 0});
  chain.push_back(ptr);
  if (auto ref = schema->find("$ref"); ref != schema->end()) {
    TG_ASSIGN_OR_RETURN(std::string target, ResolveRef(ptr, *ref));
    TG_RETURN_IF_ERROR(FlattenInto(target, conj, chain, visited));
  }
  if (auto all = schema->find("allOf"); all != schema->end()) {
    for (size_t i = 0; i < all->size(); ++i) {
      TG_RETURN_IF_ERROR(FlattenInto(Child(PointerChild(ptr, "allOf"), i), conj, chain, visited));
    }
  }
  chain.pop_back();
  return absl::OkStatus();
}

absl::StatusOr<SchemaConverter::Conj> SchemaConverter::Flatten(
    const std::vector<std::string>& ptrs) {
  Conj conj;
  absl::flat_hash_set<std::string> visited;
  for (const std::string& ptr : ptrs) {
    std::vector<std::string> chain;
    TG_RETURN_IF_ERROR(FlattenInto(ptr, conj, chain, visited));
  }
  return conj;
}

const Json* SchemaConverter::Keyword(const Part& part, const char* name) const {
  const Json& schema = *schemas_.at(part.ptr);
  if (!schema.is_object()) return nullptr;
  const std::string_view n(name);
  if ((part.consumed & kAnyOfDone) && n == "anyOf") return nullptr;
  if ((part.consumed & kOneOfDone) && n == "oneOf") return nullptr;
  if ((part.consumed & kEnumDone) && (n == "enum" || n == "const")) return nullptr;
  auto it = schema.find(name);
  return it == schema.end() ? nullptr : &*it;
}

std::string SchemaConverter::Key(const Conj& conj, uint8_t types) const {
  if (conj.never) return "never";
  std::vector<std::string> parts;
  parts.reserve(conj.parts.size());
  for (const Part& p : conj.parts) parts.push_back(absl::StrCat(p.ptr, "#", p.consumed));
  std::sort(parts.begin(), parts.end());
  return absl::StrCat(absl::StrJoin(parts, "|"), "@", types);
}

void SchemaConverter::NoteEmpty(std::string reason) {
  if (empty_reason_.empty()) empty_reason_ = std::move(reason);
}

}  // namespace textgen::json_schema_internal
