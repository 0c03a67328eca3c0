#include "engine/chat/assistant_message.h"

namespace textgen {

void AssistantMessage::Apply(const AssistantOutputEvent& e) {
  using Type = AssistantOutputEvent::Type;
  switch (e.type) {
    case Type::kContent:
      content += e.text;
      break;
    case Type::kReasoning:
      reasoning += e.text;
      break;
    case Type::kToolCallBegin:
      tool_calls.push_back(ParsedToolCall{e.id, e.name, "", false});
      break;
    case Type::kToolCallArguments:
      if (e.tool_index >= 0 && static_cast<size_t>(e.tool_index) < tool_calls.size()) {
        tool_calls[e.tool_index].arguments += e.text;
      }
      break;
    case Type::kToolCallEnd:
      if (e.tool_index >= 0 && static_cast<size_t>(e.tool_index) < tool_calls.size()) {
        tool_calls[e.tool_index].complete = e.complete;
      }
      break;
  }
}

void AssistantMessage::Apply(const std::vector<AssistantOutputEvent>& events) {
  for (const AssistantOutputEvent& e : events) Apply(e);
}

nlohmann::ordered_json AssistantMessage::ToOpenAiMessage(bool arguments_as_objects) const {
  nlohmann::ordered_json m = {{"role", "assistant"}};
  m["content"] = content.empty() && !tool_calls.empty() ? nlohmann::ordered_json(nullptr)
                                                        : nlohmann::ordered_json(content);
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const ParsedToolCall& c : tool_calls) {
      nlohmann::ordered_json arguments = c.arguments;
      if (arguments_as_objects && c.complete) {
        nlohmann::ordered_json parsed =
            nlohmann::ordered_json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) arguments = std::move(parsed);
      }
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", std::move(arguments)}}}});
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace textgen
