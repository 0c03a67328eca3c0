#include "server/chat_prompter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/util/status_macros.h"
#include "google/protobuf/struct.pb.h"

namespace textgen::server {
namespace {

// Ordered: keys keep the order they came in, as the template expects (see ChatTemplateInput).
using json = nlohmann::ordered_json;

constexpr const char* kRoles[] = {"system", "user", "assistant", "tool"};
// Template variables the server sets itself: a kwarg of that name would silently lose.
constexpr const char* kReservedKwargs[] = {"messages", "add_generation_prompt", "bos_token",
                                           "eos_token", "tools"};

json StructToJson(const google::protobuf::Struct& s);

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
    case google::protobuf::Value::kStructValue:
      return StructToJson(v.struct_value());
    case google::protobuf::Value::kListValue: {
      json a = json::array();
      for (const auto& item : v.list_value().values()) a.push_back(ValueToJson(item));
      return a;
    }
    default:
      return nullptr;
  }
}

// A Struct as the JSON object it holds, keys sorted: a protobuf Map's iteration order is
// unspecified (it differs between two maps of the same fields), and it would become the
// schema's property order, so the same request would get a different grammar (and answer)
// each time.
json StructToJson(const google::protobuf::Struct& s) {
  std::vector<const std::string*> keys;
  keys.reserve(s.fields().size());
  for (const auto& [k, field] : s.fields()) keys.push_back(&k);
  std::sort(keys.begin(), keys.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  json o = json::object();
  for (const std::string* k : keys) o[*k] = ValueToJson(s.fields().at(*k));
  return o;
}

// A gRPC field path from the pipeline's OpenAI-shaped one ("tools[1].function.name").
std::string GrpcFieldNames(absl::string_view message) {
  return absl::StrReplaceAll(message, {{".function.", "."}});
}

absl::StatusOr<std::vector<ToolSpec>> ToolsOf(const v1::ChatRequest& request) {
  if (request.tools_size() == 0) return std::vector<ToolSpec>();
  nlohmann::json tools = nlohmann::json::array();
  for (const v1::Tool& t : request.tools()) {
    nlohmann::json fn = {{"name", t.name()}};
    if (!t.description().empty()) fn["description"] = t.description();
    if (t.has_parameters())
      fn["parameters"] = nlohmann::json::parse(StructToJson(t.parameters()).dump());
    tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  absl::StatusOr<std::vector<ToolSpec>> parsed = ParseTools(tools);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(), GrpcFieldNames(parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<ToolChoice> ToolChoiceOf(const v1::ChatRequest& request,
                                        const std::vector<ToolSpec>& tools) {
  nlohmann::json choice;  // null: the default (auto with tools, none without)
  switch (request.tool_choice().mode()) {
    case v1::ToolChoice::AUTO:
      if (!tools.empty()) choice = "auto";
      break;
    case v1::ToolChoice::NONE:
      choice = "none";
      break;
    case v1::ToolChoice::REQUIRED:
      choice = "required";
      break;
    case v1::ToolChoice::FUNCTION:
      choice = {{"type", "function"},
                {"function", {{"name", request.tool_choice().function_name()}}}};
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tool_choice.mode: unknown value ", request.tool_choice().mode()));
  }
  absl::StatusOr<ToolChoice> parsed = ParseToolChoice(choice, tools);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(), GrpcFieldNames(parsed.status().message()));
  }
  return parsed;
}

// Invalid UTF-8 (a generation cut inside a character) is replaced rather than thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

size_t ChatTextBytes(const v1::ChatRequest& request) {
  size_t bytes = 0;
  for (const v1::ChatMessage& m : request.messages()) {
    bytes += m.role().size() + m.content().size() + m.name().size() + m.tool_call_id().size() +
             m.reasoning().size();
    for (const v1::ToolCall& c : m.tool_calls()) {
      bytes += c.id().size() + c.name().size() + c.arguments().size();
    }
  }
  return bytes;
}

bool ChatNeedsWork(const v1::ChatRequest& request) {
  return request.tools_size() > 0 || request.has_response_format();
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
    if (!m.reasoning().empty()) msg["reasoning_content"] = m.reasoning();
    if (m.tool_calls_size() > 0) {
      json calls = json::array();
      for (int k = 0; k < m.tool_calls_size(); ++k) {
        const v1::ToolCall& c = m.tool_calls(k);
        // Templates take the arguments as an object (transformers' convention).
        json args = json::parse(c.arguments().empty() ? "{}" : c.arguments(), nullptr, false);
        if (!args.is_object()) {
          return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].tool_calls[", k,
                                                         "].arguments: not a JSON object's text"));
        }
        calls.push_back({{"id", c.id()},
                         {"type", "function"},
                         {"function", {{"name", c.name()}, {"arguments", std::move(args)}}}});
      }
      msg["tool_calls"] = std::move(calls);
    }
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

absl::StatusOr<OutputFormat> ToOutputFormat(const v1::ResponseFormat& format, bool has_format,
                                            const std::string& field) {
  OutputFormat out;
  out.field = field;
  if (!has_format) return out;
  switch (format.format_case()) {
    case v1::ResponseFormat::kJsonSchema:
      out.kind = OutputFormat::Kind::kJsonSchema;
      out.schema = StructToJson(format.json_schema());
      out.field = field + ".json_schema";
      break;
    case v1::ResponseFormat::kJsonObject:
      if (format.json_object()) out.kind = OutputFormat::Kind::kJsonObject;
      break;
    case v1::ResponseFormat::kRegex:
      out.kind = OutputFormat::Kind::kRegex;
      out.text = format.regex();
      out.field = field + ".regex";
      break;
    case v1::ResponseFormat::kChoice:
      out.kind = OutputFormat::Kind::kChoice;
      out.choices.assign(format.choice().values().begin(), format.choice().values().end());
      out.field = field + ".choice";
      break;
    case v1::ResponseFormat::kGrammar:
      out.kind = OutputFormat::Kind::kGrammar;
      out.text = format.grammar();
      out.field = field + ".grammar";
      break;
    case v1::ResponseFormat::FORMAT_NOT_SET:
      break;
  }
  return out;
}

absl::StatusOr<PreparedGeneration> ChatPrompter::BuildGenerate(const v1::GenerateRequest& request,
                                                               const RequestLimits& limits) const {
  PreparedGeneration out;
  TG_ASSIGN_OR_RETURN(out.request, ToEngineRequest(request, limits));
  TG_ASSIGN_OR_RETURN(
      OutputFormat format,
      ToOutputFormat(request.response_format(), request.has_response_format(), "response_format"));
  TG_ASSIGN_OR_RETURN(out.request.decoding.constraint, preparer_->OutputConstraint(format));
  return out;
}

absl::StatusOr<PreparedGeneration> ChatPrompter::Build(const Engine& engine,
                                                       const v1::ChatRequest& request,
                                                       const RequestLimits& limits,
                                                       const std::string& owner) const {
  TG_RETURN_IF_ERROR(CheckPromptBytes("messages", ChatTextBytes(request), limits));
  PreparedGeneration out;
  EngineRequest& req = out.request;
  TG_ASSIGN_OR_RETURN(req.decoding, ToDecodingOptions(request, limits));
  TG_RETURN_IF_ERROR(ApplyPrediction(request, limits, &req));
  ChatTurn turn;
  TG_ASSIGN_OR_RETURN(json messages, ChatMessagesToJson(request));
  TG_ASSIGN_OR_RETURN(turn.template_kwargs, TemplateKwargsToJson(request));
  turn.add_generation_prompt =
      request.has_add_generation_prompt() ? request.add_generation_prompt() : true;
  TG_ASSIGN_OR_RETURN(turn.tools, ToolsOf(request));
  TG_ASSIGN_OR_RETURN(turn.tool_choice, ToolChoiceOf(request, turn.tools));
  turn.parallel_tool_calls =
      request.has_parallel_tool_calls() ? request.parallel_tool_calls() : true;
  TG_ASSIGN_OR_RETURN(
      turn.output,
      ToOutputFormat(request.response_format(), request.has_response_format(), "response_format"));
  if (request.reasoning_format() == v1::REASONING_RAW) {
    turn.reasoning_format = ReasoningFormat::kRaw;
  } else if (request.reasoning_format() != v1::REASONING_SEPARATE) {
    return absl::InvalidArgumentError(
        absl::StrCat("reasoning_format: unknown value ", request.reasoning_format()));
  }
  if (request.reasoning_budget() > 0) {
    turn.reasoning_budget = static_cast<int>(
        std::min<uint32_t>(request.reasoning_budget(), std::numeric_limits<int32_t>::max()));
  }

  TG_RETURN_IF_ERROR(CheckSessionId(request.session_id()));
  if (!request.session_id().empty()) {
    TG_ASSIGN_OR_RETURN(SessionAttachment held,
                        engine.GetSessionAttachment(request.session_id(), owner));
    if (!held.attachment.empty()) {
      turn.messages = json::parse(held.attachment, nullptr, /*allow_exceptions=*/false);
      if (!turn.messages.is_array()) {
        return absl::InternalError("the session's messages are not a JSON array");
      }
    }
    req.session_id = request.session_id();
    req.session_owner = owner;
    req.session_prompt = SessionPrompt::kWhole;
    // Rendered from this version of the conversation: a turn that ends in between would be lost.
    req.session_version = held.version;
  }
  for (json& m : messages) turn.messages.push_back(std::move(m));

  TG_ASSIGN_OR_RETURN(PreparedChat chat, preparer_->Prepare(turn));
  req.prompt_ids = std::move(chat.prompt);
  req.decoding.constraint = std::move(chat.constraint);
  req.decoding.shown_special_tokens = std::move(chat.shown_special_tokens);
  out.answer = chat.answer;
  if (!req.session_id.empty()) {
    // Without a generation prompt the answer continues the last assistant message (a prefill);
    // otherwise it is a message of its own, parsed as the stream was.
    const bool continues = !turn.add_generation_prompt &&
                           turn.messages.back().value("role", "") == std::string("assistant");
    req.session_attachment = [conversation = std::move(turn.messages), continues,
                              plan = chat.answer](const GenerationResult& r) {
      json all = conversation;
      const std::string& answer = r.hypotheses[0].text;
      if (continues) {
        all.back()["content"] = all.back()["content"].get<std::string>() + answer;
      } else if (plan.parse) {
        json message = AssistantOutputParser::ParseWhole(plan.options, answer)
                           .ToOpenAiMessage(/*arguments_as_objects=*/true);
        // Templates test `'x' in content`: an answer that is only calls has "" as its content.
        if (message["content"].is_null()) message["content"] = "";
        all.push_back(std::move(message));
      } else {
        all.push_back({{"role", "assistant"}, {"content", answer}});
      }
      return Dump(all);
    };
  }
  return out;
}

}  // namespace textgen::server
