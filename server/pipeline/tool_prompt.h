// How the tools reach the model: as the `tools` variable of templates that render them, or, for
// templates that do not, described in the system message with the generic JSON answer shape
// (engine/chat/tool_call_format.h: kGenericJson).
#ifndef TEXTGEN_SERVER_PIPELINE_TOOL_PROMPT_H_
#define TEXTGEN_SERVER_PIPELINE_TOOL_PROMPT_H_

#include <vector>

#include "engine/chat/tool_spec.h"
#include "nlohmann/json.hpp"

namespace textgen::server {

// OpenAI's tools array: [{"type": "function", "function": {"name", "description", "parameters"}}].
nlohmann::ordered_json ToolsAsOpenAiJson(const std::vector<ToolSpec>& tools);

// Adds the tools and the answer's JSON shape to the system message (prepended when there is
// none; appended to its text when there is one).
void AddToolsToSystemMessage(const std::vector<ToolSpec>& tools, bool parallel_tool_calls,
                             nlohmann::ordered_json* messages);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PIPELINE_TOOL_PROMPT_H_
