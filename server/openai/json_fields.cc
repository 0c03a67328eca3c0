#include "server/openai/json_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/openai/api_error.h"

namespace textgen::server::openai {
namespace {

// A double for messages: "0.5", "2", "1e+30".
std::string NumberText(double v) { return absl::StrCat(v); }

}  // namespace

std::string JsonTypeName(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null:
      return "null";
    case nlohmann::ordered_json::value_t::boolean:
      return "a boolean";
    case nlohmann::ordered_json::value_t::string:
      return "a string";
    case nlohmann::ordered_json::value_t::array:
      return "an array";
    case nlohmann::ordered_json::value_t::object:
      return "an object";
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::ordered_json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

std::string JsonFields::Name(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : absl::StrCat(prefix_, ".", std::string(key));
}

const nlohmann::ordered_json* JsonFields::Get(std::string_view key) const {
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(std::string_view key) const { return Get(key) != nullptr; }

absl::Status JsonFields::Bool(std::string_view key, std::optional<bool>* out) const {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean()) {
    return FieldError(Name(key), absl::StrCat("expected a boolean, got ", JsonTypeName(*v)));
  }
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFields::Int(std::string_view key, int64_t min, int64_t max,
                             std::optional<int64_t>* out) const {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  const std::string range = absl::StrCat("[", min, ", ", max, "]");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return FieldError(Name(key),
                      absl::StrCat("must be an integer in ", range, ", got ", v->get<uint64_t>()));
  }
  if (!v->is_number_integer()) {
    return FieldError(Name(key), absl::StrCat("must be an integer in ", range, ", got ",
                                              v->is_number() ? v->dump() : JsonTypeName(*v)));
  }
  const int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    return FieldError(Name(key), absl::StrCat("must be an integer in ", range, ", got ", i));
  }
  *out = i;
  return absl::OkStatus();
}

absl::Status JsonFields::Number(std::string_view key, double min, double max, bool min_exclusive,
                                std::optional<double>* out) const {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  const std::string range =
      absl::StrCat(min_exclusive ? "(" : "[", NumberText(min), ", ", NumberText(max), "]");
  if (!v->is_number()) {
    return FieldError(Name(key),
                      absl::StrCat("must be a number in ", range, ", got ", JsonTypeName(*v)));
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max || (min_exclusive && d == min)) {
    return FieldError(Name(key), absl::StrCat("must be in ", range, ", got ", NumberText(d)));
  }
  *out = d;
  return absl::OkStatus();
}

absl::Status JsonFields::String(std::string_view key, std::optional<std::string>* out) const {
  const nlohmann::ordered_json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) {
    return FieldError(Name(key), absl::StrCat("expected a string, got ", JsonTypeName(*v)));
  }
  *out = v->get<std::string>();
  return absl::OkStatus();
}

}  // namespace textgen::server::openai
