#include "server/pipeline/tool_prompt.h"

#include <string>

#include "engine/chat/tool_call_grammar.h"

namespace textgen::server {

using json = nlohmann::ordered_json;

json ToolsAsOpenAiJson(const std::vector<ToolSpec>& tools) {
  json out = json::array();
  for (const ToolSpec& t : tools) {
    json fn = {{"name", t.name}};
    if (!t.description.empty()) fn["description"] = t.description;
    fn["parameters"] = t.parameters;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

void AddToolsToSystemMessage(const std::vector<ToolSpec>& tools, bool parallel_tool_calls,
                             json* messages) {
  const std::string text = GenericToolSystemPrompt(tools, parallel_tool_calls);
  if (!messages->empty() && (*messages)[0].value("role", "") == "system" &&
      (*messages)[0]["content"].is_string()) {
    json& system = (*messages)[0];
    system["content"] = system["content"].get<std::string>() + "\n\n" + text;
    return;
  }
  messages->insert(messages->begin(), json{{"role", "system"}, {"content", text}});
}

}  // namespace textgen::server
