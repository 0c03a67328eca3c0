// The tools a chat request offers (OpenAI's `tools` array) and its `tool_choice`, validated.
#ifndef TEXTGEN_ENGINE_CHAT_TOOL_SPEC_H_
#define TEXTGEN_ENGINE_CHAT_TOOL_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace textgen {

// One function tool.
struct ToolSpec {
  std::string name;  // OpenAI's ^[a-zA-Z0-9_-]{1,64}$
  std::string description;
  // A JSON Schema object; {"type": "object", "properties": {}} when the request had none.
  // Ordered: the grammar writes properties in the order of "properties" as the client sent it
  // (when the tools came as ordered_json; nlohmann::json sorts keys).
  nlohmann::ordered_json parameters;
};

enum class ToolChoiceMode {
  kNone,      // never call: the answer is content (tool markup in it stays text)
  kAuto,      // the model decides
  kRequired,  // at least one call
  kNamed,     // exactly this function (ToolChoice::function_name)
};

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function_name;  // kNamed only
};

// OpenAI's rule for a function name: 1 to 64 of [a-zA-Z0-9_-].
bool IsValidToolName(std::string_view name);

// Validates an OpenAI `tools` array ([{"type": "function", "function": {"name", "description"?,
// "parameters"?, "strict"?}}]). InvalidArgument naming the field path ("tools[2].function.name:
// ...") for anything else: not an array, a type other than "function", a missing, invalid or
// repeated name, a description that is not a string, parameters that are not an object.
// (Whether the parameters are a schema the grammar can express is checked by ToolCallGrammar.)
absl::StatusOr<std::vector<ToolSpec>> ParseTools(const nlohmann::ordered_json& tools);
absl::StatusOr<std::vector<ToolSpec>> ParseTools(const nlohmann::json& tools);

// Validates `tool_choice`: "none", "auto", "required" or {"type": "function", "function":
// {"name": "f"}} naming one of `tools`. Absent (null): "auto" with tools, "none" without, as
// OpenAI. InvalidArgument naming the field ("tool_choice.function.name: ...") otherwise.
absl::StatusOr<ToolChoice> ParseToolChoice(const nlohmann::json& tool_choice,
                                           const std::vector<ToolSpec>& tools);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_TOOL_SPEC_H_
