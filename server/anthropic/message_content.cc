#include "server/anthropic/message_content.h"

#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/chat/tool_spec.h"
#include "engine/util/status_macros.h"
#include "server/openai/api_error.h"
#include "server/openai/json_fields.h"

namespace textgen::server::anthropic {
namespace {

using json = nlohmann::ordered_json;
using openai::FieldError;
using openai::JsonFields;
using openai::JsonTypeName;

// A required string field.
absl::Status RequiredString(const JsonFields& f, std::string_view key, std::string* out) {
  std::optional<std::string> v;
  TG_RETURN_IF_ERROR(f.String(key, &v));
  if (!v.has_value()) return FieldError(f.Name(key), "is required");
  *out = *std::move(v);
  return absl::OkStatus();
}

// The block's "type", required.
absl::Status BlockType(const json& block, const std::string& name, std::string* type) {
  TG_RETURN_IF_ERROR(ExpectObject(block, name));
  return RequiredString(JsonFields(block, name), "type", type);
}

// Known block types this server cannot take (a text-only model).
bool IsUnsupportedMedia(const std::string& type) {
  return type == "image" || type == "document" || type == "search_result" ||
         type == "container_upload";
}

absl::Status RefuseBlock(const std::string& type, const std::string& name, const char* where) {
  if (IsUnsupportedMedia(type)) {
    return FieldError(absl::StrCat(name, ".type"),
                      absl::StrCat("\"", type,
                                   "\" blocks are not supported by this server (text-only "
                                   "models)"));
  }
  if (type == "text" || type == "tool_use" || type == "tool_result" || type == "thinking" ||
      type == "redacted_thinking") {
    return FieldError(absl::StrCat(name, ".type"),
                      absl::StrCat("\"", type, "\" blocks are not allowed in ", where));
  }
  return FieldError(absl::StrCat(name, ".type"),
                    absl::StrCat("unknown content block type \"", type, "\""));
}

// {"type": "text", "text", "cache_control"?, "citations"?: null}.
absl::Status ReadTextBlock(const json& block, const std::string& name, std::string* text) {
  TG_RETURN_IF_ERROR(CheckKeys(block, name, {"type", "text", "cache_control", "citations"}));
  JsonFields f(block, name);
  if (f.Has("citations")) {
    return FieldError(f.Name("citations"), "citations are not supported by this server");
  }
  if (const json* cc = f.Get("cache_control")) {
    TG_RETURN_IF_ERROR(CheckCacheControl(*cc, f.Name("cache_control")));
  }
  std::string piece;
  TG_RETURN_IF_ERROR(RequiredString(f, "text", &piece));
  *text += piece;
  return absl::OkStatus();
}

// A string, or an array of text blocks (`where` names the field's owner in messages).
absl::Status ReadText(const json& v, const std::string& name, const char* where,
                      std::string* text) {
  if (v.is_string()) {
    *text += v.get<std::string>();
    return absl::OkStatus();
  }
  if (!v.is_array()) {
    return FieldError(
        name, absl::StrCat("expected a string or an array of text blocks, got ", JsonTypeName(v)));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string block = absl::StrCat(name, "[", i, "]");
    std::string type;
    TG_RETURN_IF_ERROR(BlockType(v[i], block, &type));
    if (type != "text") return RefuseBlock(type, block, where);
    TG_RETURN_IF_ERROR(ReadTextBlock(v[i], block, text));
  }
  return absl::OkStatus();
}

// The conversion's state: the messages so far and the tool_use ids seen (id -> tool name).
struct Conversion {
  json* messages;
  size_t* text_bytes;
  absl::flat_hash_map<std::string, std::string> tool_names;
};

absl::Status ReadToolResult(const json& block, const std::string& name, Conversion* c) {
  TG_RETURN_IF_ERROR(
      CheckKeys(block, name, {"type", "tool_use_id", "content", "is_error", "cache_control"}));
  JsonFields f(block, name);
  std::string id;
  TG_RETURN_IF_ERROR(RequiredString(f, "tool_use_id", &id));
  auto tool = c->tool_names.find(id);
  if (tool == c->tool_names.end()) {
    return FieldError(f.Name("tool_use_id"),
                      absl::StrCat("no tool_use block of an earlier assistant message has the "
                                   "id \"",
                                   id, "\""));
  }
  std::optional<bool> is_error;
  TG_RETURN_IF_ERROR(f.Bool("is_error", &is_error));
  if (const json* cc = f.Get("cache_control")) {
    TG_RETURN_IF_ERROR(CheckCacheControl(*cc, f.Name("cache_control")));
  }
  std::string text;
  if (const json* content = f.Get("content")) {
    TG_RETURN_IF_ERROR(ReadText(*content, f.Name("content"), "tool results", &text));
  }
  // Templates know no error flag: the model reads it in the text.
  if (is_error.value_or(false)) text = text.empty() ? "Error" : absl::StrCat("Error: ", text);
  *c->text_bytes += text.size();
  c->messages->push_back(
      json{{"role", "tool"}, {"tool_call_id", id}, {"name", tool->second}, {"content", text}});
  return absl::OkStatus();
}

absl::Status ConvertUser(const json& content, const std::string& name, Conversion* c) {
  if (content.is_string()) {
    *c->text_bytes += content.get_ref<const std::string&>().size();
    c->messages->push_back(json{{"role", "user"}, {"content", content}});
    return absl::OkStatus();
  }
  std::string text;
  bool has_text = false;
  auto flush = [&]() {
    if (!has_text) return;
    *c->text_bytes += text.size();
    c->messages->push_back(json{{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string block = absl::StrCat(name, "[", j, "]");
    std::string type;
    TG_RETURN_IF_ERROR(BlockType(content[j], block, &type));
    if (type == "text") {
      TG_RETURN_IF_ERROR(ReadTextBlock(content[j], block, &text));
      has_text = true;
    } else if (type == "tool_result") {
      flush();
      TG_RETURN_IF_ERROR(ReadToolResult(content[j], block, c));
    } else {
      return RefuseBlock(type, block, "user messages");
    }
  }
  flush();
  return absl::OkStatus();
}

absl::Status ReadToolUse(const json& block, const std::string& name, Conversion* c,
                         json* tool_calls) {
  TG_RETURN_IF_ERROR(CheckKeys(block, name, {"type", "id", "name", "input", "cache_control"}));
  JsonFields f(block, name);
  std::string id, tool;
  TG_RETURN_IF_ERROR(RequiredString(f, "id", &id));
  if (id.empty()) return FieldError(f.Name("id"), "must not be empty");
  TG_RETURN_IF_ERROR(RequiredString(f, "name", &tool));
  if (!IsValidToolName(tool)) {
    return FieldError(f.Name("name"), "must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
  }
  const json* input = f.Get("input");
  if (input == nullptr) return FieldError(f.Name("input"), "is required");
  if (!input->is_object()) {
    return FieldError(f.Name("input"),
                      absl::StrCat("expected an object, got ", JsonTypeName(*input)));
  }
  if (const json* cc = f.Get("cache_control")) {
    TG_RETURN_IF_ERROR(CheckCacheControl(*cc, f.Name("cache_control")));
  }
  if (!c->tool_names.emplace(id, tool).second) {
    return FieldError(f.Name("id"), absl::StrCat("the id \"", id, "\" is used twice"));
  }
  *c->text_bytes += input->dump().size();
  tool_calls->push_back(json{
      {"id", id}, {"type", "function"}, {"function", {{"name", tool}, {"arguments", *input}}}});
  return absl::OkStatus();
}

absl::Status ConvertAssistant(const json& content, const std::string& name, Conversion* c) {
  json message = {{"role", "assistant"}};
  if (content.is_string()) {
    *c->text_bytes += content.get_ref<const std::string&>().size();
    message["content"] = content;
    c->messages->push_back(std::move(message));
    return absl::OkStatus();
  }
  std::string text, reasoning;
  json tool_calls = json::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string block = absl::StrCat(name, "[", j, "]");
    std::string type;
    TG_RETURN_IF_ERROR(BlockType(content[j], block, &type));
    JsonFields f(content[j], block);
    if (type == "text") {
      TG_RETURN_IF_ERROR(ReadTextBlock(content[j], block, &text));
    } else if (type == "tool_use") {
      TG_RETURN_IF_ERROR(ReadToolUse(content[j], block, c, &tool_calls));
    } else if (type == "thinking") {
      // The signature is another service's proof of its own reasoning: nothing to check here.
      TG_RETURN_IF_ERROR(CheckKeys(content[j], block, {"type", "thinking", "signature"}));
      std::string piece;
      std::optional<std::string> signature;
      TG_RETURN_IF_ERROR(RequiredString(f, "thinking", &piece));
      TG_RETURN_IF_ERROR(f.String("signature", &signature));
      reasoning += piece;
    } else if (type == "redacted_thinking") {
      TG_RETURN_IF_ERROR(CheckKeys(content[j], block, {"type", "data"}));
      std::string data;
      TG_RETURN_IF_ERROR(RequiredString(f, "data", &data));
    } else {
      return RefuseBlock(type, block, "assistant messages");
    }
  }
  *c->text_bytes += text.size() + reasoning.size();
  // An empty string, not null, when the message is only tool calls: some templates (Qwen3's)
  // concatenate or search the content and raise on null; the others render "" as they render
  // null (nothing).
  message["content"] = text;
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) message["tool_calls"] = std::move(tool_calls);
  c->messages->push_back(std::move(message));
  return absl::OkStatus();
}

absl::Status ConvertSystem(const json& body, Conversion* c) {
  auto it = body.find("system");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  std::string text;
  TG_RETURN_IF_ERROR(ReadText(*it, "system", "the system prompt", &text));
  if (text.empty()) return absl::OkStatus();
  *c->text_bytes += text.size();
  c->messages->push_back(json{{"role", "system"}, {"content", text}});
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckKeys(const json& object, const std::string& name,
                       std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) return FieldError(absl::StrCat(name, ".", key), "unknown field");
  }
  return absl::OkStatus();
}

absl::Status ExpectObject(const json& v, const std::string& name) {
  if (v.is_object()) return absl::OkStatus();
  return FieldError(name, absl::StrCat("expected an object, got ", JsonTypeName(v)));
}

absl::Status CheckCacheControl(const json& value, const std::string& name) {
  TG_RETURN_IF_ERROR(ExpectObject(value, name));
  TG_RETURN_IF_ERROR(CheckKeys(value, name, {"type", "ttl"}));
  JsonFields f(value, name);
  std::string type;
  TG_RETURN_IF_ERROR(RequiredString(f, "type", &type));
  if (type != "ephemeral") {
    return FieldError(f.Name("type"), absl::StrCat("must be \"ephemeral\", got \"", type, "\""));
  }
  std::optional<std::string> ttl;
  TG_RETURN_IF_ERROR(f.String("ttl", &ttl));
  if (ttl.has_value() && *ttl != "5m" && *ttl != "1h") {
    return FieldError(f.Name("ttl"), absl::StrCat("must be \"5m\" or \"1h\", got \"", *ttl, "\""));
  }
  return absl::OkStatus();
}

absl::Status ConvertConversation(const json& body, json* messages, size_t* text_bytes) {
  Conversion c{messages, text_bytes, {}};
  TG_RETURN_IF_ERROR(ConvertSystem(body, &c));
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return FieldError("messages", "is required");
  if (!it->is_array() || it->empty()) {
    return FieldError("messages", "must be a non-empty array of messages");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string name = absl::StrCat("messages[", i, "]");
    const json& m = (*it)[i];
    TG_RETURN_IF_ERROR(ExpectObject(m, name));
    TG_RETURN_IF_ERROR(CheckKeys(m, name, {"role", "content"}));
    JsonFields f(m, name);
    std::string role;
    TG_RETURN_IF_ERROR(RequiredString(f, "role", &role));
    if (role != "user" && role != "assistant") {
      return FieldError(f.Name("role"),
                        absl::StrCat("must be \"user\" or \"assistant\", got \"", role, "\"",
                                     role == "system" ? " (the system prompt is the top-level "
                                                        "\"system\" field)"
                                                      : ""));
    }
    const json* content = f.Get("content");
    if (content == nullptr) return FieldError(f.Name("content"), "is required");
    if (!content->is_string() && !(content->is_array() && !content->empty())) {
      return FieldError(
          f.Name("content"),
          absl::StrCat("expected a string or a non-empty array of content blocks, "
                       "got ",
                       content->is_array() ? "an empty array" : JsonTypeName(*content)));
    }
    if (role == "user") {
      TG_RETURN_IF_ERROR(ConvertUser(*content, f.Name("content"), &c));
    } else {
      if (i + 1 == it->size()) {
        return FieldError(name,
                          "a final assistant message (a prefill for the answer to continue) is "
                          "not supported by this server: end the conversation with a user "
                          "message");
      }
      TG_RETURN_IF_ERROR(ConvertAssistant(*content, f.Name("content"), &c));
    }
  }
  return absl::OkStatus();
}

}  // namespace textgen::server::anthropic
