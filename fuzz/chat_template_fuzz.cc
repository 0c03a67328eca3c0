// The chat-template interpreter on arbitrary source: parse, then render a fixed conversation
// (system, user, an assistant turn with a tool call, a tool result, user). Byte 0 picks the
// render options: add_generation_prompt (bit 0), tools given (bit 1), bos/eos tokens given
// (bit 2), a template keyword argument (bit 3); the rest is the template.
#include <chrono>
#include <cstdint>
#include <string_view>

#include "engine/chat/chat_template.h"

namespace {

using json = nlohmann::ordered_json;

textgen::ChatTemplateInput MakeInput(uint8_t flags) {
  textgen::ChatTemplateInput in;
  in.messages = json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? {{ not a tag }} \u00e9\ud83d\ude00"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "weather", "arguments": {"city": "Paris", "days": [1, 2.5, true]}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
  ])");
  in.add_generation_prompt = (flags & 1) != 0;
  if (flags & 2) {
    in.tools = json::parse(R"([{"type": "function", "function": {"name": "weather",
      "description": "Forecast", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  }
  if (flags & 4) {
    in.bos_token = "<s>";
    in.eos_token = "</s>";
  }
  if (flags & 8) in.kwargs = json{{"enable_thinking", false}};
  in.now = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view source(reinterpret_cast<const char*>(data + 1), size - 1);
  auto tmpl = textgen::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return 0;
  (void)tmpl->Render(MakeInput(data[0]));
  return 0;
}
