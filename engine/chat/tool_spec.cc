#include "engine/chat/tool_spec.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

absl::Status FieldError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(path + ": " + what);
}

}  // namespace

bool IsValidToolName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::vector<ToolSpec>> ParseTools(const nlohmann::json& tools) {
  return ParseTools(nlohmann::ordered_json(tools));
}

absl::StatusOr<std::vector<ToolSpec>> ParseTools(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return FieldError("tools", "must be an array");
  std::vector<ToolSpec> specs;
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = absl::StrCat("tools[", i, "]");
    const nlohmann::ordered_json& tool = tools[i];
    if (!tool.is_object()) return FieldError(path, "must be an object");
    const auto type = tool.find("type");
    if (type == tool.end() || !type->is_string() || *type != "function") {
      return FieldError(path + ".type", "must be \"function\"");
    }
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return FieldError(path + ".function", "must be an object");
    }
    ToolSpec spec;
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string()) {
      return FieldError(path + ".function.name", "must be a string");
    }
    spec.name = name->get<std::string>();
    if (!IsValidToolName(spec.name)) {
      return FieldError(path + ".function.name",
                        absl::StrCat("\"", spec.name, "\" must match ^[a-zA-Z0-9_-]{1,64}$"));
    }
    if (!names.insert(spec.name).second) {
      return FieldError(path + ".function.name",
                        absl::StrCat("\"", spec.name, "\" names an earlier tool too"));
    }
    if (const auto d = function->find("description"); d != function->end() && !d->is_null()) {
      if (!d->is_string()) return FieldError(path + ".function.description", "must be a string");
      spec.description = d->get<std::string>();
    }
    if (const auto p = function->find("parameters"); p != function->end() && !p->is_null()) {
      if (!p->is_object()) {
        return FieldError(path + ".function.parameters", "must be a JSON Schema object");
      }
      spec.parameters = *p;
    } else {
      spec.parameters = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
    }
    if (const auto s = function->find("strict");
        s != function->end() && !s->is_null() && !s->is_boolean()) {
      return FieldError(path + ".function.strict", "must be a boolean");
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<ToolChoice> ParseToolChoice(const nlohmann::json& choice,
                                           const std::vector<ToolSpec>& tools) {
  ToolChoice out;
  if (choice.is_null()) {
    out.mode = tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
    return out;
  }
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "none") {
      out.mode = ToolChoiceMode::kNone;
    } else if (s == "auto") {
      out.mode = ToolChoiceMode::kAuto;
    } else if (s == "required") {
      out.mode = ToolChoiceMode::kRequired;
    } else {
      return FieldError("tool_choice",
                        absl::StrCat("\"", s, "\" is not \"none\", \"auto\" or \"required\""));
    }
    if (out.mode != ToolChoiceMode::kNone && tools.empty()) {
      return FieldError("tool_choice", absl::StrCat("\"", s, "\" needs tools"));
    }
    return out;
  }
  if (!choice.is_object()) {
    return FieldError("tool_choice", "must be \"none\", \"auto\", \"required\" or an object");
  }
  const auto type = choice.find("type");
  if (type == choice.end() || !type->is_string() || *type != "function") {
    return FieldError("tool_choice.type", "must be \"function\"");
  }
  const auto function = choice.find("function");
  if (function == choice.end() || !function->is_object()) {
    return FieldError("tool_choice.function", "must be an object");
  }
  const auto name = function->find("name");
  if (name == function->end() || !name->is_string()) {
    return FieldError("tool_choice.function.name", "must be a string");
  }
  out.mode = ToolChoiceMode::kNamed;
  out.function_name = name->get<std::string>();
  for (const ToolSpec& t : tools) {
    if (t.name == out.function_name) return out;
  }
  return FieldError("tool_choice.function.name",
                    absl::StrCat("\"", out.function_name, "\" is not one of the tools"));
}

}  // namespace textgen
