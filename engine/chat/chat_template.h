// A chat template: Jinja source rendered as Hugging Face transformers' apply_chat_template
// renders it (Python jinja2's sandboxed environment with trim_blocks and lstrip_blocks), byte
// for byte. The interpreter covers the subset real templates use; a construct it does not
// support is an error at Parse (naming it and its line), never a wrong prompt.
#ifndef TEXTGEN_ENGINE_CHAT_CHAT_TEMPLATE_H_
#define TEXTGEN_ENGINE_CHAT_CHAT_TEMPLATE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace textgen {

// What apply_chat_template passes to the template. JSON objects are ordered_json: their keys
// keep the order they came in, as Python dicts do (`tojson` and printed dicts show it).
struct ChatTemplateInput {
  // OpenAI / Hugging Face shape: [{"role", "content", "tool_calls"?, "tool_call_id"?, ...}].
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Unset: `tools` is None in the template (transformers passes tools=None, documents=None).
  std::optional<nlohmann::ordered_json> tools;
  bool add_generation_prompt = false;
  // Unset: not passed (undefined in the template).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Further template keyword arguments (e.g. {"enable_thinking": false}); an object. They
  // override the variables above of the same name.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // The clock strftime_now reads (formatted in local time); unset: now.
  std::optional<std::chrono::system_clock::time_point> now;
};

// Immutable after Parse; Render is const and safe to call concurrently. Cheap to copy.
class ChatTemplate {
 public:
  // InvalidArgument for a syntax error or an unsupported construct, naming it and its line.
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source);

  // The rendered text. InvalidArgument with the template's message when it raises
  // (raise_exception, a type error, an undefined value used where jinja2 would fail), naming
  // what failed; never a partial text.
  absl::StatusOr<std::string> Render(const ChatTemplateInput& input) const;

  const std::string& source() const;

 private:
  struct Program;
  explicit ChatTemplate(std::shared_ptr<const Program> program);
  std::shared_ptr<const Program> program_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_CHAT_TEMPLATE_H_
