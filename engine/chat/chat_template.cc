#include "engine/chat/chat_template.h"

#include <ctime>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/chat/jinja_interpreter.h"
#include "engine/chat/jinja_parser.h"

namespace textgen {

struct ChatTemplate::Program {
  std::string source;
  jinja::Body body;
};

ChatTemplate::ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  absl::StatusOr<jinja::Body> body = jinja::Parse(source);
  if (!body.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", body.status().message()));
  }
  auto program = std::make_shared<Program>();
  program->source = std::string(source);
  program->body = *std::move(body);
  return ChatTemplate(std::move(program));
}

const std::string& ChatTemplate::source() const { return program_->source; }

absl::StatusOr<std::string> ChatTemplate::Render(const ChatTemplateInput& input) const {
  using jinja::Value;
  if (!input.messages.is_array()) {
    return absl::InvalidArgumentError("chat template: messages must be a JSON array");
  }
  if (!input.kwargs.is_object()) {
    return absl::InvalidArgumentError("chat template: keyword arguments must be a JSON object");
  }
  auto root = std::make_shared<jinja::Scope>();
  root->vars["messages"] = Value::FromJson(input.messages);
  root->vars["tools"] = input.tools ? Value::FromJson(*input.tools) : Value::None();
  root->vars["documents"] = Value::None();
  root->vars["add_generation_prompt"] = Value::Bool(input.add_generation_prompt);
  if (input.bos_token) root->vars["bos_token"] = Value::Str(*input.bos_token);
  if (input.eos_token) root->vars["eos_token"] = Value::Str(*input.eos_token);
  for (const auto& [k, v] : input.kwargs.items()) root->vars[k] = Value::FromJson(v);

  const std::time_t t =
      std::chrono::system_clock::to_time_t(input.now.value_or(std::chrono::system_clock::now()));
  std::tm now{};
  localtime_r(&t, &now);
  jinja::Interpreter interpreter(now);
  try {
    return interpreter.Render(program_->body, std::move(root));
  } catch (const jinja::RenderError& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template raised ", e.type, ": ", e.what()));
  }
}

}  // namespace textgen
