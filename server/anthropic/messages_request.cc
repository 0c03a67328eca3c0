#include "server/anthropic/messages_request.h"

#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/chat/tool_spec.h"
#include "engine/decoding/stop_matcher.h"
#include "engine/util/status_macros.h"
#include "server/anthropic/message_content.h"
#include "server/openai/api_error.h"
#include "server/openai/json_fields.h"

namespace textgen::server::anthropic {
namespace {

using json = nlohmann::ordered_json;
using openai::FieldError;
using openai::JsonFields;
using openai::JsonTypeName;

// Which route takes a top-level field, and whether it is one this server cannot honour
// (refused unless null).
struct FieldRule {
  bool create = true;
  bool count_tokens = true;
  bool unsupported = false;
};

const std::map<std::string, FieldRule>& FieldRules() {
  static const auto* rules = new std::map<std::string, FieldRule>{
      // Applied, both routes.
      {"model", {}},
      {"messages", {}},
      {"system", {}},
      {"tools", {}},
      {"tool_choice", {}},
      {"thinking", {}},
      {"cache_control", {}},
      {"output_config", {}},
      // Applied, /v1/messages only.
      {"max_tokens", {true, false}},
      {"stream", {true, false}},
      {"stop_sequences", {true, false}},
      {"temperature", {true, false}},
      {"top_p", {true, false}},
      {"top_k", {true, false}},
      {"metadata", {true, false}},
      // Anthropic's, with nothing behind them here.
      {"service_tier", {true, false, true}},
      {"container", {true, false, true}},
      {"mcp_servers", {true, true, true}},
      {"context_management", {true, true, true}},
      {"inference_geo", {true, false, true}},
      {"speed", {true, true, true}},
      {"diagnostics", {true, false, true}},
  };
  return *rules;
}

absl::Status CheckFields(MessagesRoute route, const json& body) {
  const bool create = route == MessagesRoute::kCreate;
  for (const auto& [key, value] : body.items()) {
    auto it = FieldRules().find(key);
    if (it == FieldRules().end() || (create ? !it->second.create : !it->second.count_tokens)) {
      return FieldError(key, absl::StrCat("unknown field for ",
                                          create ? "/v1/messages" : "/v1/messages/count_tokens"));
    }
    if (it->second.unsupported && !value.is_null()) {
      return FieldError(key, "is not supported by this server");
    }
  }
  return absl::OkStatus();
}

// One custom tool: {"name", "description"?, "input_schema", "cache_control"?, "type"?:
// "custom", "strict"?}. Anthropic's server tools (web search, bash, ...) are refused.
absl::StatusOr<ToolSpec> ParseTool(const json& t, const std::string& name) {
  TG_RETURN_IF_ERROR(ExpectObject(t, name));
  JsonFields f(t, name);
  std::optional<std::string> type, tool_name, description;
  TG_RETURN_IF_ERROR(f.String("type", &type));
  if (type.has_value() && *type != "custom") {
    return FieldError(f.Name("type"),
                      absl::StrCat("server tools (\"", *type,
                                   "\") are not supported by this server: only custom tools "
                                   "with an input_schema"));
  }
  TG_RETURN_IF_ERROR(CheckKeys(
      t, name, {"type", "name", "description", "input_schema", "cache_control", "strict"}));
  TG_RETURN_IF_ERROR(f.String("name", &tool_name));
  if (!tool_name.has_value()) return FieldError(f.Name("name"), "is required");
  if (!IsValidToolName(*tool_name)) {
    return FieldError(f.Name("name"), "must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
  }
  TG_RETURN_IF_ERROR(f.String("description", &description));
  // Every schema keyword accepted is enforced, strict or not.
  std::optional<bool> strict;
  TG_RETURN_IF_ERROR(f.Bool("strict", &strict));
  if (const json* cc = f.Get("cache_control")) {
    TG_RETURN_IF_ERROR(CheckCacheControl(*cc, f.Name("cache_control")));
  }
  const json* schema = f.Get("input_schema");
  if (schema == nullptr) return FieldError(f.Name("input_schema"), "is required");
  TG_RETURN_IF_ERROR(ExpectObject(*schema, f.Name("input_schema")));
  auto schema_type = schema->find("type");
  if (schema_type == schema->end() || *schema_type != "object") {
    return FieldError(f.Name("input_schema.type"), "must be \"object\"");
  }
  return ToolSpec{*tool_name, description.value_or(""), *schema};
}

// tool_choice: {"type": "auto" | "any" | "tool" (with "name") | "none",
// "disable_parallel_tool_use"?}. Absent: auto with tools, none without.
absl::Status ParseToolChoice(const JsonFields& f, ChatTurn* chat) {
  const json* v = f.Get("tool_choice");
  chat->tool_choice.mode = chat->tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  if (v == nullptr) return absl::OkStatus();
  TG_RETURN_IF_ERROR(ExpectObject(*v, "tool_choice"));
  JsonFields c(*v, "tool_choice");
  std::optional<std::string> type, name;
  std::optional<bool> disable_parallel;
  TG_RETURN_IF_ERROR(c.String("type", &type));
  if (!type.has_value()) return FieldError(c.Name("type"), "is required");
  if (*type == "tool") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "tool_choice", {"type", "name", "disable_parallel_tool_use"}));
  } else if (*type == "auto" || *type == "any") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "tool_choice", {"type", "disable_parallel_tool_use"}));
  } else if (*type == "none") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "tool_choice", {"type"}));
  } else {
    return FieldError(c.Name("type"),
                      absl::StrCat("must be auto, any, tool or none, got \"", *type, "\""));
  }
  TG_RETURN_IF_ERROR(c.Bool("disable_parallel_tool_use", &disable_parallel));
  chat->parallel_tool_calls = !disable_parallel.value_or(false);
  if (*type == "none") {
    chat->tool_choice.mode = ToolChoiceMode::kNone;
    return absl::OkStatus();
  }
  if (*type == "auto") return absl::OkStatus();  // with no tools there is nothing to choose
  if (chat->tools.empty()) {
    return FieldError("tool_choice", absl::StrCat("\"", *type, "\" needs tools"));
  }
  if (*type == "any") {
    chat->tool_choice.mode = ToolChoiceMode::kRequired;
    return absl::OkStatus();
  }
  TG_RETURN_IF_ERROR(c.String("name", &name));
  if (!name.has_value()) return FieldError(c.Name("name"), "is required");
  bool known = false;
  for (const ToolSpec& t : chat->tools) known = known || t.name == *name;
  if (!known) {
    return FieldError(c.Name("name"), absl::StrCat("no tool is named \"", *name, "\""));
  }
  chat->tool_choice.mode = ToolChoiceMode::kNamed;
  chat->tool_choice.function_name = *name;
  return absl::OkStatus();
}

absl::Status ParseTools(const JsonFields& f, ChatTurn* chat) {
  if (const json* tools = f.Get("tools")) {
    if (!tools->is_array()) {
      return FieldError("tools", absl::StrCat("expected an array, got ", JsonTypeName(*tools)));
    }
    absl::flat_hash_set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string name = absl::StrCat("tools[", i, "]");
      TG_ASSIGN_OR_RETURN(ToolSpec tool, ParseTool((*tools)[i], name));
      if (!names.insert(tool.name).second) {
        return FieldError(name + ".name", absl::StrCat("\"", tool.name, "\" is given twice"));
      }
      chat->tools.push_back(std::move(tool));
    }
  }
  return ParseToolChoice(f, chat);
}

// thinking: see the header. `max_tokens` is unset on count_tokens.
absl::Status ParseThinking(const JsonFields& f, std::optional<int64_t> max_tokens,
                           MessagesRequest* r) {
  const json* v = f.Get("thinking");
  if (v == nullptr) return absl::OkStatus();
  TG_RETURN_IF_ERROR(ExpectObject(*v, "thinking"));
  JsonFields t(*v, "thinking");
  std::optional<std::string> type, display;
  TG_RETURN_IF_ERROR(t.String("type", &type));
  if (!type.has_value()) return FieldError(t.Name("type"), "is required");
  ChatTurn& chat = r->chat;
  if (*type == "disabled") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "thinking", {"type"}));
    chat.template_kwargs["enable_thinking"] = false;
    chat.reasoning_format = ReasoningFormat::kSeparate;
    chat.reasoning_budget = 0;
    return absl::OkStatus();
  }
  if (*type == "enabled") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "thinking", {"type", "budget_tokens", "display"}));
    std::optional<int64_t> budget;
    TG_RETURN_IF_ERROR(t.Int("budget_tokens", 1, std::numeric_limits<int32_t>::max(), &budget));
    if (!budget.has_value()) return FieldError(t.Name("budget_tokens"), "is required");
    if (max_tokens.has_value() && *budget >= *max_tokens) {
      return FieldError(t.Name("budget_tokens"), absl::StrCat("must be less than max_tokens (",
                                                              *max_tokens, "), got ", *budget));
    }
    chat.reasoning_budget = static_cast<int>(*budget);
  } else if (*type == "adaptive") {
    TG_RETURN_IF_ERROR(CheckKeys(*v, "thinking", {"type", "display"}));
  } else {
    return FieldError(t.Name("type"),
                      absl::StrCat("must be enabled, adaptive or disabled, got \"", *type, "\""));
  }
  TG_RETURN_IF_ERROR(t.String("display", &display));
  if (display.has_value() && *display != "summarized") {
    return FieldError(t.Name("display"),
                      absl::StrCat("only \"summarized\" (the thinking shown) is supported, got \"",
                                   *display, "\""));
  }
  chat.template_kwargs["enable_thinking"] = true;
  chat.reasoning_format = ReasoningFormat::kSeparate;
  r->thinking_requested = true;
  return absl::OkStatus();
}

// output_config: {"format"?: {"type": "json_schema", "schema"}, "effort"?: null}.
absl::Status ParseOutputConfig(const JsonFields& f, ChatTurn* chat) {
  const json* v = f.Get("output_config");
  if (v == nullptr) return absl::OkStatus();
  TG_RETURN_IF_ERROR(ExpectObject(*v, "output_config"));
  TG_RETURN_IF_ERROR(CheckKeys(*v, "output_config", {"format", "effort"}));
  JsonFields o(*v, "output_config");
  if (o.Has("effort")) return FieldError(o.Name("effort"), "is not supported by this server");
  const json* format = o.Get("format");
  if (format == nullptr) return absl::OkStatus();
  TG_RETURN_IF_ERROR(ExpectObject(*format, "output_config.format"));
  TG_RETURN_IF_ERROR(CheckKeys(*format, "output_config.format", {"type", "schema"}));
  JsonFields fm(*format, "output_config.format");
  std::optional<std::string> type;
  TG_RETURN_IF_ERROR(fm.String("type", &type));
  if (type != "json_schema") {
    return FieldError(fm.Name("type"), absl::StrCat("must be \"json_schema\", got ",
                                                    type.has_value() ? "\"" + *type + "\""
                                                                     : std::string("nothing")));
  }
  const json* schema = fm.Get("schema");
  if (schema == nullptr) return FieldError(fm.Name("schema"), "is required");
  TG_RETURN_IF_ERROR(ExpectObject(*schema, fm.Name("schema")));
  chat->output.kind = OutputFormat::Kind::kJsonSchema;
  chat->output.schema = *schema;
  chat->output.field = "output_config.format.schema";
  return absl::OkStatus();
}

absl::Status ParseStopSequences(const JsonFields& f, std::vector<std::string>* out) {
  const json* v = f.Get("stop_sequences");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) {
    return FieldError("stop_sequences",
                      absl::StrCat("expected an array of strings, got ", JsonTypeName(*v)));
  }
  if (v->size() > kMaxStops) {
    return FieldError("stop_sequences",
                      absl::StrCat("must have at most ", kMaxStops, " entries, got ", v->size()));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string name = absl::StrCat("stop_sequences[", i, "]");
    const json& s = (*v)[i];
    if (!s.is_string()) {
      return FieldError(name, absl::StrCat("expected a string, got ", JsonTypeName(s)));
    }
    const std::string& text = s.get_ref<const std::string&>();
    if (text.empty()) return FieldError(name, "must not be empty");
    if (text.size() > kMaxStopBytes) {
      return FieldError(
          name, absl::StrCat("must be at most ", kMaxStopBytes, " bytes, got ", text.size()));
    }
    out->push_back(text);
  }
  return absl::OkStatus();
}

// temperature (default 1; 0 is greedy), top_p, top_k (0: no cut).
absl::Status ParseSampling(const JsonFields& f, DecodingOptions* d) {
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  TG_RETURN_IF_ERROR(f.Number("temperature", 0, 1, false, &temperature));
  TG_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &top_p));
  TG_RETURN_IF_ERROR(f.Int("top_k", 0, std::numeric_limits<int32_t>::max(), &top_k));
  const double t = temperature.value_or(1.0);
  if (t == 0) {
    // Greedy: a sampling field that would change something is refused, not ignored.
    const char* why = "has no effect with temperature 0 (greedy)";
    if (top_p.has_value() && *top_p != 1) return FieldError("top_p", why);
    if (top_k.has_value() && *top_k > 0) return FieldError("top_k", why);
    d->method = DecodingMethod::kGreedy;
    return absl::OkStatus();
  }
  d->method = DecodingMethod::kSample;
  d->sampling.temperature = static_cast<float>(t);
  d->sampling.top_p = static_cast<float>(top_p.value_or(1.0));
  d->sampling.top_k = static_cast<int>(top_k.value_or(0));
  return absl::OkStatus();
}

// metadata: {"user_id"?: string}, accepted without effect (Anthropic's abuse tracking).
absl::Status ParseMetadata(const JsonFields& f) {
  const json* v = f.Get("metadata");
  if (v == nullptr) return absl::OkStatus();
  TG_RETURN_IF_ERROR(ExpectObject(*v, "metadata"));
  TG_RETURN_IF_ERROR(CheckKeys(*v, "metadata", {"user_id"}));
  std::optional<std::string> user;
  return JsonFields(*v, "metadata").String("user_id", &user);
}

}  // namespace

absl::StatusOr<MessagesRequest> ParseMessagesRequest(MessagesRoute route, std::string_view body,
                                                     const RequestLimits& limits) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body must be a JSON object, got ", JsonTypeName(j)));
  }
  TG_RETURN_IF_ERROR(CheckFields(route, j));
  MessagesRequest r;
  JsonFields f(j, "");
  std::optional<std::string> model;
  TG_RETURN_IF_ERROR(f.String("model", &model));
  if (!model.has_value()) return FieldError("model", "is required");
  r.model = *model;

  size_t text_bytes = 0;
  TG_RETURN_IF_ERROR(ConvertConversation(j, &r.chat.messages, &text_bytes));
  if (absl::Status st = CheckPromptBytes("messages", text_bytes, limits); !st.ok()) {
    return openai::WithParam(st, "messages");
  }
  if (const json* cc = f.Get("cache_control")) {
    TG_RETURN_IF_ERROR(CheckCacheControl(*cc, "cache_control"));
  }
  TG_RETURN_IF_ERROR(ParseTools(f, &r.chat));
  TG_RETURN_IF_ERROR(ParseOutputConfig(f, &r.chat));

  std::optional<int64_t> max_tokens;
  if (route == MessagesRoute::kCreate) {
    TG_RETURN_IF_ERROR(f.Int("max_tokens", 1, limits.max_max_new_tokens, &max_tokens));
    if (!max_tokens.has_value()) return FieldError("max_tokens", "is required");
    r.decoding.max_new_tokens = static_cast<int>(*max_tokens);
    std::optional<bool> stream;
    TG_RETURN_IF_ERROR(f.Bool("stream", &stream));
    r.stream = stream.value_or(false);
    TG_RETURN_IF_ERROR(ParseStopSequences(f, &r.decoding.stop));
    TG_RETURN_IF_ERROR(ParseSampling(f, &r.decoding));
    TG_RETURN_IF_ERROR(ParseMetadata(f));
  }
  TG_RETURN_IF_ERROR(ParseThinking(f, max_tokens, &r));
  return r;
}

absl::Status ToAnthropicNames(const absl::Status& status) {
  std::string message(status.message());
  // "tools[2].function.parameters": the tool's index is the same in both APIs.
  message = absl::StrReplaceAll(message, {{"].function.parameters", "].input_schema"},
                                          {"response_format", "output_config.format"},
                                          {"reasoning_budget", "thinking.budget_tokens"},
                                          {"tool_choice required", "tool_choice any"}});
  return absl::Status(status.code(), message);
}

}  // namespace textgen::server::anthropic
