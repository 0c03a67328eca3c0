// What AssistantOutputParser reports (events) and their sum (the assistant message).
#ifndef TEXTGEN_ENGINE_CHAT_ASSISTANT_MESSAGE_H_
#define TEXTGEN_ENGINE_CHAT_ASSISTANT_MESSAGE_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace textgen {

// One piece of a parsed answer, in answer order. Events of one call come as kToolCallBegin,
// then zero or more kToolCallArguments, then kToolCallEnd, before anything else.
struct AssistantOutputEvent {
  enum class Type {
    kContent,            // text: answer text
    kReasoning,          // text: reasoning ("thinking") text
    kToolCallBegin,      // tool_index, id, name
    kToolCallArguments,  // tool_index, text: the next bytes of the call's arguments JSON
    kToolCallEnd,        // tool_index, complete
  };
  Type type = Type::kContent;
  std::string text;
  int tool_index = -1;  // 0, 1, ... in the order the calls begin
  std::string id;       // "call_" + 24 alphanumerics, or the model's own id (Mistral)
  std::string name;
  // kToolCallEnd: whether the arguments are a whole JSON object. False when the answer ended
  // (length, stop) or the model broke the JSON after the call had begun: the arguments are
  // then a prefix of what the model meant (the server may report finish_reason "length").
  bool complete = true;
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, exactly the concatenated fragments
  bool complete = false;
};

// The sum of a parser's events.
struct AssistantMessage {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;

  void Apply(const AssistantOutputEvent& event);
  void Apply(const std::vector<AssistantOutputEvent>& events);

  // OpenAI's assistant message: {"role": "assistant", "content": text or null,
  // "reasoning_content"?: text, "tool_calls"?: [{"id", "type": "function", "function":
  // {"name", "arguments"}}]}. `arguments` is the JSON text (OpenAI's shape), or with
  // `arguments_as_objects` the parsed object (what chat templates expect; an incomplete call's
  // arguments stay text).
  nlohmann::ordered_json ToOpenAiMessage(bool arguments_as_objects = false) const;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_ASSISTANT_MESSAGE_H_
