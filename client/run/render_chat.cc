#include "client/run/render_chat.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/chat/model_chat_template.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "textgen-run: %s\n", message.c_str());
  return 2;
}

bool ReadJson(const std::string& path, nlohmann::ordered_json* out, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot read " + path;
    return false;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = nlohmann::ordered_json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *error = path + ": not valid JSON";
    return false;
  }
  return true;
}

}  // namespace

int RenderChatMain(const RenderChatArgs& a) {
  if (a.messages_path.empty()) return Fail("--render needs --messages FILE.json");
  if (a.template_path.empty() && a.model_path.empty()) {
    return Fail("--render needs --chat-template FILE or --model PATH");
  }
  ChatTemplateInput input;
  std::string error;
  nlohmann::ordered_json messages;
  if (!ReadJson(a.messages_path, &messages, &error)) return Fail(error);
  // A conversation file as in shared/chat-templates ({"messages", "tools"?}) works too.
  if (messages.is_object() && messages.contains("messages")) {
    if (messages.contains("tools") && !messages["tools"].is_null() && a.tools_path.empty()) {
      input.tools = messages["tools"];
    }
    messages = nlohmann::ordered_json(messages["messages"]);
  }
  if (!messages.is_array()) return Fail(a.messages_path + ": expected a JSON array of messages");
  input.messages = std::move(messages);
  if (!a.tools_path.empty()) {
    nlohmann::ordered_json tools;
    if (!ReadJson(a.tools_path, &tools, &error)) return Fail(error);
    input.tools = std::move(tools);
  }
  if (!a.kwargs_json.empty()) {
    input.kwargs = nlohmann::ordered_json::parse(a.kwargs_json, nullptr, false);
    if (!input.kwargs.is_object()) return Fail("--template-kwargs: expected a JSON object");
  }
  input.add_generation_prompt = a.add_generation_prompt;
  input.bos_token = a.bos_token;
  input.eos_token = a.eos_token;

  absl::StatusOr<std::string> text;
  if (!a.model_path.empty()) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(a.model_path);
    if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
    absl::StatusOr<ModelChatTemplate> t =
        LoadModelChatTemplate(a.model_path, **tokenizer, a.template_path);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    text = RenderChat(*t, std::move(input));
  } else {
    std::ifstream f(a.template_path, std::ios::binary);
    if (!f) return Fail("cannot read " + a.template_path);
    std::ostringstream ss;
    ss << f.rdbuf();
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Parse(ss.str());
    if (!t.ok()) return Fail(a.template_path + ": " + std::string(t.status().message()));
    text = t->Render(input);
  }
  if (!text.ok()) return Fail(std::string(text.status().message()));
  std::fwrite(text->data(), 1, text->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 2;
}

}  // namespace textgen
