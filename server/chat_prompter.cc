#include "server/chat_prompter.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"

namespace textgen::server {
namespace {

// Ordered: keys keep the order they came in, as the template expects (see ChatTemplateInput).
using json = nlohmann::ordered_json;

constexpr const char* kRoles[] = {"system", "user", "assistant", "tool"};
// Template variables the server sets itself: a kwarg of that name would silently lose.
constexpr const char* kReservedKwargs[] = {"messages", "add_generation_prompt", "bos_token",
                                           "eos_token", "tools"};

json ValueToJson(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kBoolValue:
      return v.bool_value();
    case google::protobuf::Value::kNumberValue: {
      // Struct has only doubles; a whole number is what the client meant as an integer
      // (templates print 3, not 3.0).
      const double d = v.number_value();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9007199254740992.0) {
        return static_cast<int64_t>(d);
      }
      return d;
    }
    case google::protobuf::Value::kStringValue:
      return v.string_value();
    case google::protobuf::Value::kStructValue: {
      json o = json::object();
      for (const auto& [k, field] : v.struct_value().fields()) o[k] = ValueToJson(field);
      return o;
    }
    case google::protobuf::Value::kListValue: {
      json a = json::array();
      for (const auto& item : v.list_value().values()) a.push_back(ValueToJson(item));
      return a;
    }
    default:
      return nullptr;
  }
}

// Invalid UTF-8 (a generation cut inside a character) is replaced rather than thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

size_t ChatTextBytes(const v1::ChatRequest& request) {
  size_t bytes = 0;
  for (const v1::ChatMessage& m : request.messages()) {
    bytes += m.role().size() + m.content().size() + m.name().size() + m.tool_call_id().size();
  }
  return bytes;
}

absl::StatusOr<json> ChatMessagesToJson(const v1::ChatRequest& request) {
  if (request.messages_size() == 0) {
    return absl::InvalidArgumentError("messages: at least one message is needed");
  }
  json out = json::array();
  for (int i = 0; i < request.messages_size(); ++i) {
    const v1::ChatMessage& m = request.messages(i);
    bool known = false;
    for (const char* role : kRoles) known = known || m.role() == role;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].role: unknown role \"",
                                                     m.role(),
                                                     "\" (system, user, assistant or tool)"));
    }
    json msg = {{"role", m.role()}, {"content", m.content()}};
    if (!m.name().empty()) msg["name"] = m.name();
    if (!m.tool_call_id().empty()) msg["tool_call_id"] = m.tool_call_id();
    out.push_back(std::move(msg));
  }
  return out;
}

absl::StatusOr<json> TemplateKwargsToJson(const v1::ChatRequest& request) {
  json out = json::object();
  for (const auto& [name, value] : request.template_kwargs().fields()) {
    for (const char* reserved : kReservedKwargs) {
      if (name == reserved) {
        return absl::InvalidArgumentError(absl::StrCat(
            "template_kwargs: \"", name, "\" is set by the server and cannot be passed"));
      }
    }
    out[name] = ValueToJson(value);
  }
  return out;
}

ChatPrompter::ChatPrompter(absl::StatusOr<ModelChatTemplate> chat_template)
    : template_(std::move(chat_template)) {}

absl::StatusOr<EngineRequest> ChatPrompter::Build(const Engine& engine,
                                                  const v1::ChatRequest& request,
                                                  const RequestLimits& limits,
                                                  const std::string& owner) const {
  if (absl::Status st = CheckPromptBytes("messages", ChatTextBytes(request), limits); !st.ok()) {
    return st;
  }
  if (!template_.ok()) return absl::FailedPreconditionError(template_.status().message());
  EngineRequest out;
  auto decoding = ToDecodingOptions(request, limits);
  if (!decoding.ok()) return decoding.status();
  out.decoding = *std::move(decoding);
  auto messages = ChatMessagesToJson(request);
  if (!messages.ok()) return messages.status();
  ChatTemplateInput input;
  auto kwargs = TemplateKwargsToJson(request);
  if (!kwargs.ok()) return kwargs.status();
  input.kwargs = *std::move(kwargs);
  input.add_generation_prompt =
      request.has_add_generation_prompt() ? request.add_generation_prompt() : true;

  if (absl::Status st = CheckSessionId(request.session_id()); !st.ok()) return st;
  if (!request.session_id().empty()) {
    auto held = engine.GetSessionAttachment(request.session_id(), owner);
    if (!held.ok()) return held.status();
    if (!held->attachment.empty()) {
      input.messages = json::parse(held->attachment, nullptr, /*allow_exceptions=*/false);
      if (!input.messages.is_array()) {
        return absl::InternalError("the session's messages are not a JSON array");
      }
    }
    out.session_id = request.session_id();
    out.session_owner = owner;
    out.session_prompt = SessionPrompt::kWhole;
    // Rendered from this version of the conversation: a turn that ends in between would be lost.
    out.session_version = held->version;
  }
  for (json& m : *messages) input.messages.push_back(std::move(m));

  auto rendered = RenderChat(*template_, input);
  if (!rendered.ok()) return rendered.status();
  out.prompt_ids = EncodeChatPrompt(engine.model().tokenizer(), *rendered);
  if (out.prompt_ids.empty()) {
    return absl::InvalidArgumentError("the chat template rendered an empty prompt");
  }
  if (!out.session_id.empty()) {
    // Without a generation prompt the answer continues the last assistant message (a prefill);
    // otherwise it is a message of its own.
    const bool continues = !input.add_generation_prompt &&
                           input.messages.back().value("role", "") == std::string("assistant");
    out.session_attachment = [conversation = std::move(input.messages),
                              continues](const GenerationResult& r) {
      json all = conversation;
      const std::string& answer = r.hypotheses[0].text;
      if (continues) {
        all.back()["content"] = all.back()["content"].get<std::string>() + answer;
      } else {
        all.push_back({{"role", "assistant"}, {"content", answer}});
      }
      return Dump(all);
    };
  }
  return out;
}

}  // namespace textgen::server
