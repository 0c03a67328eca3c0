#include "server/openai/completion_request.h"

#include <functional>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/decoding/beam_search.h"
#include "engine/decoding/stop_matcher.h"
#include "engine/util/status_macros.h"
#include "server/openai/api_error.h"
#include "server/openai/json_fields.h"

namespace textgen::server::openai {
namespace {

using json = nlohmann::ordered_json;

// How one top-level field is treated: applied by the parser, or refused unless it holds its
// no-op value (`noop`; absent and null are always fine).
struct FieldRule {
  bool chat = true;
  bool completions = true;
  std::function<bool(const json&)> noop;  // empty: applied
};

bool IsZero(const json& v) { return v.is_number() && v.get<double>() == 0; }
bool IsEmptyObject(const json& v) { return v.is_object() && v.empty(); }
bool IsEmptyArray(const json& v) { return v.is_array() && v.empty(); }
bool IsFalse(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool Never(const json&) { return false; }

const std::map<std::string, FieldRule>& FieldRules() {
  static const auto* rules = new std::map<std::string, FieldRule>{
      // Applied, both endpoints.
      {"model", {}},
      {"stream", {}},
      {"stream_options", {}},
      {"n", {}},
      {"max_tokens", {}},
      {"temperature", {}},
      {"top_p", {}},
      {"stop", {}},
      {"seed", {}},
      {"logprobs", {}},
      {"user", {}},  // an end-user id for abuse tracking: accepted, has no effect here
      // vLLM's extensions.
      {"use_beam_search", {}},
      {"best_of", {}},
      {"length_penalty", {}},
      {"early_stopping", {}},
      {"top_k", {}},
      {"min_p", {}},
      {"repetition_penalty", {}},
      {"ignore_eos", {}},
      // Ours: speculative decoding on or off for this request (the output is the same).
      {"speculative", {}},
      // OpenAI's Predicted Outputs (chat only there; the completions endpoint takes it too).
      {"prediction", {}},
      // Applied, one endpoint.
      {"messages", {true, false, {}}},
      {"max_completion_tokens", {true, false, {}}},
      {"top_logprobs", {true, false, {}}},
      {"add_generation_prompt", {true, false, {}}},
      {"chat_template_kwargs", {true, false, {}}},
      {"prompt", {false, true, {}}},
      {"tools", {true, false, {}}},
      {"tool_choice", {true, false, {}}},
      {"parallel_tool_calls", {true, false, {}}},
      {"response_format", {}},
      {"reasoning_format", {true, false, {}}},
      {"reasoning_budget", {true, false, {}}},
      // The same as response_format, as llama.cpp's server and vLLM spell them.
      {"grammar", {}},
      {"json_schema", {}},
      {"guided_json", {}},
      {"guided_regex", {}},
      {"guided_choice", {}},
      {"guided_grammar", {}},
      // Not implemented: refused unless they ask for nothing.
      {"presence_penalty", {true, true, IsZero}},
      {"frequency_penalty", {true, true, IsZero}},
      {"logit_bias", {true, true, IsEmptyObject}},
      {"echo", {false, true, IsFalse}},
      {"suffix", {false, true, [](const json& v) { return v.is_string() && v.empty(); }}},
      // The deprecated forms of tools / tool_choice.
      {"functions", {true, false, IsEmptyArray}},
      {"function_call", {true, false, [](const json& v) { return v == "none"; }}},
      {"modalities", {true, false, [](const json& v) { return v == json::array({"text"}); }}},
      {"store", {true, false, IsFalse}},
      {"metadata", {true, false, IsEmptyObject}},
      {"audio", {true, false, Never}},
      {"reasoning_effort", {true, false, Never}},
      {"service_tier", {true, false, Never}},
      {"web_search_options", {true, false, Never}},
  };
  return *rules;
}

absl::Status CheckFields(Endpoint endpoint, const json& body) {
  const bool chat = endpoint == Endpoint::kChat;
  for (const auto& [key, value] : body.items()) {
    auto it = FieldRules().find(key);
    if (it == FieldRules().end() || (chat ? !it->second.chat : !it->second.completions)) {
      return FieldError(key, absl::StrCat("unknown field for ",
                                          chat ? "/v1/chat/completions" : "/v1/completions"));
    }
    if (it->second.noop && !value.is_null() && !it->second.noop(value)) {
      return FieldError(key, "is not supported by this server");
    }
  }
  return absl::OkStatus();
}

// One message's content: a string, or text parts joined (as OpenAI concatenates them).
absl::Status ParseContent(const json& message, const std::string& name, json* out) {
  const json& content = message.at("content");
  if (content.is_string()) {
    *out = content;
    return absl::OkStatus();
  }
  if (!content.is_array()) {
    return FieldError(name, absl::StrCat("expected a string or an array of text parts, got ",
                                         JsonTypeName(content)));
  }
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string part = absl::StrCat(name, "[", j, "]");
    if (!content[j].is_object()) {
      return FieldError(part, absl::StrCat("expected an object, got ", JsonTypeName(content[j])));
    }
    JsonFields f(content[j], part);
    std::optional<std::string> type, piece;
    TG_RETURN_IF_ERROR(f.String("type", &type));
    if (type != "text") {
      return FieldError(f.Name("type"), absl::StrCat("only text parts are supported, got \"",
                                                     type.value_or("(none)"), "\""));
    }
    TG_RETURN_IF_ERROR(f.String("text", &piece));
    if (!piece.has_value()) return FieldError(f.Name("text"), "is required");
    text += *piece;
  }
  *out = text;
  return absl::OkStatus();
}

// An assistant message's tool_calls as templates take them (transformers' convention, as gRPC
// Chat gives them): the arguments' JSON text (OpenAI's wire form) parsed into an object, so that
// templates writing `arguments | tojson` do not quote a string. Other keys pass through.
absl::Status ParseToolCalls(const json& calls, const std::string& name, json* message) {
  if (!calls.is_array()) {
    return FieldError(name, absl::StrCat("expected an array, got ", JsonTypeName(calls)));
  }
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string call_name = absl::StrCat(name, "[", k, "]");
    const json& c = calls[k];
    if (!c.is_object()) {
      return FieldError(call_name, absl::StrCat("expected an object, got ", JsonTypeName(c)));
    }
    JsonFields f(c, call_name);
    std::optional<std::string> type, id, fn_name;
    TG_RETURN_IF_ERROR(f.String("type", &type));
    if (type.has_value() && *type != "function") {
      return FieldError(f.Name("type"), absl::StrCat("must be \"function\", got \"", *type, "\""));
    }
    TG_RETURN_IF_ERROR(f.String("id", &id));
    const json* fn = f.Get("function");
    if (fn == nullptr) return FieldError(f.Name("function"), "is required");
    if (!fn->is_object()) {
      return FieldError(f.Name("function"),
                        absl::StrCat("expected an object, got ", JsonTypeName(*fn)));
    }
    JsonFields g(*fn, f.Name("function"));
    TG_RETURN_IF_ERROR(g.String("name", &fn_name));
    if (!fn_name.has_value()) return FieldError(g.Name("name"), "is required");
    json arguments = json::object();
    if (const json* a = g.Get("arguments"); a != nullptr && a->is_string()) {
      const std::string& text = a->get_ref<const std::string&>();
      if (!text.empty()) arguments = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!arguments.is_object()) {
        return FieldError(g.Name("arguments"), "is not a JSON object's text");
      }
    } else if (a != nullptr && a->is_object()) {
      arguments = *a;
    } else if (a != nullptr) {
      return FieldError(
          g.Name("arguments"),
          absl::StrCat("expected a string (a JSON object's text), got ", JsonTypeName(*a)));
    }
    json call = c;
    call["function"]["arguments"] = std::move(arguments);
    out.push_back(std::move(call));
  }
  (*message)["tool_calls"] = std::move(out);
  return absl::OkStatus();
}

absl::Status ParseMessages(const json& body, CompletionRequest* r) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return FieldError("messages", "is required");
  if (!it->is_array() || it->empty()) {
    return FieldError("messages", "must be a non-empty array of messages");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string name = absl::StrCat("messages[", i, "]");
    const json& m = (*it)[i];
    if (!m.is_object()) {
      return FieldError(name, absl::StrCat("expected an object, got ", JsonTypeName(m)));
    }
    JsonFields f(m, name);
    std::optional<std::string> role;
    TG_RETURN_IF_ERROR(f.String("role", &role));
    if (!role.has_value()) return FieldError(f.Name("role"), "is required");
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant" &&
        *role != "tool") {
      return FieldError(
          f.Name("role"),
          absl::StrCat("must be system, developer, user, assistant or tool, got \"", *role, "\""));
    }
    json out = m;  // other keys (name, tool_call_id, ...) reach the template as sent
    // Templates know "system"; "developer" is OpenAI's newer name for it.
    if (*role == "developer") out["role"] = "system";
    if (f.Has("content")) {
      TG_RETURN_IF_ERROR(ParseContent(m, f.Name("content"), &out["content"]));
    } else if (*role == "assistant") {
      // An assistant turn that made tool calls may leave its content out or null (the SDKs
      // send back the message as received, "content": null). Templates concatenate and search
      // the content without checking for none (Qwen3's `'</think>' in message.content`), so
      // it reaches them as "", as gRPC's ChatMessage.content does.
      out["content"] = "";
    } else {
      return FieldError(f.Name("content"), "is required");
    }
    if (const json* calls = f.Get("tool_calls"); calls != nullptr && *calls != json::array()) {
      if (*role != "assistant") {
        return FieldError(f.Name("tool_calls"), "only assistant messages have tool calls");
      }
      TG_RETURN_IF_ERROR(ParseToolCalls(*calls, f.Name("tool_calls"), &out));
    } else {
      out.erase("tool_calls");  // null or []: none
    }
    r->chat.messages.push_back(std::move(out));
  }
  return absl::OkStatus();
}

// A token id list: every element an integer in [0, 2^31).
bool ReadIds(const json& a, std::vector<int32_t>* ids) {
  for (const json& v : a) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return false;
    }
    ids->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return true;
}

// One prompt: a string, token ids, or a one-element array of either.
absl::Status ParsePrompt(const json& body, CompletionRequest* r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return FieldError("prompt", "is required");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  } else if (p->is_array() && !p->empty() && !(*p)[0].is_number()) {
    return FieldError("prompt",
                      absl::StrCat("one prompt per request is supported, got ", p->size()));
  }
  if (p->is_string()) {
    r->prompt_text = p->get<std::string>();
    return absl::OkStatus();
  }
  if (!p->is_array() || p->empty() || !ReadIds(*p, &r->prompt_ids)) {
    return FieldError("prompt",
                      "expected a string or a non-empty array of token ids (integers >= 0)");
  }
  return absl::OkStatus();
}

// The prompt's text, or the messages' contents, against the size limit: before any rendering
// or tokenizing.
absl::Status CheckTextBytes(const CompletionRequest& r, const RequestLimits& limits) {
  size_t bytes = r.prompt_text.has_value() ? r.prompt_text->size() : 0;
  for (const json& m : r.chat.messages) {
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      bytes += content->get_ref<const std::string&>().size();
    }
  }
  const char* field = r.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (absl::Status st = CheckPromptBytes(field, bytes, limits); !st.ok()) {
    return WithParam(st, field);
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const JsonFields& f, std::vector<std::string>* out) {
  const json* v = f.Get("stop");
  if (v == nullptr) return absl::OkStatus();
  if (v->is_string()) {
    out->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        return FieldError(absl::StrCat("stop[", i, "]"),
                          absl::StrCat("expected a string, got ", JsonTypeName((*v)[i])));
      }
      out->push_back((*v)[i].get<std::string>());
    }
  } else {
    return FieldError(
        "stop", absl::StrCat("expected a string or an array of strings, got ", JsonTypeName(*v)));
  }
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].empty()) return FieldError(absl::StrCat("stop[", i, "]"), "must not be empty");
  }
  if (absl::Status st = ValidateStops(*out); !st.ok()) {
    return FieldError("stop", std::string(st.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseStreamOptions(const JsonFields& f, CompletionRequest* r) {
  std::optional<bool> stream;
  TG_RETURN_IF_ERROR(f.Bool("stream", &stream));
  r->stream = stream.value_or(false);
  const json* so = f.Get("stream_options");
  if (so == nullptr) return absl::OkStatus();
  if (!r->stream) return FieldError("stream_options", "is only allowed with stream: true");
  if (!so->is_object()) {
    return FieldError("stream_options",
                      absl::StrCat("expected an object, got ", JsonTypeName(*so)));
  }
  JsonFields o(*so, "stream_options");
  for (const auto& [key, value] : so->items()) {
    if (key != "include_usage") return FieldError(o.Name(key), "unknown field");
  }
  std::optional<bool> include_usage;
  TG_RETURN_IF_ERROR(o.Bool("include_usage", &include_usage));
  r->include_usage = include_usage.value_or(false);
  return absl::OkStatus();
}

absl::Status ParseLengthAndLogprobs(const JsonFields& f, const RequestLimits& limits,
                                    CompletionRequest* r) {
  std::optional<int64_t> max_tokens, max_completion_tokens;
  TG_RETURN_IF_ERROR(f.Int("max_tokens", 1, limits.max_max_new_tokens, &max_tokens));
  TG_RETURN_IF_ERROR(
      f.Int("max_completion_tokens", 1, limits.max_max_new_tokens, &max_completion_tokens));
  if (max_tokens && max_completion_tokens && *max_tokens != *max_completion_tokens) {
    return FieldError("max_completion_tokens", "differs from max_tokens (give one of them)");
  }
  DecodingOptions& d = r->decoding;
  if (max_completion_tokens.has_value()) {
    r->max_tokens_field = "max_completion_tokens";
    d.max_new_tokens = static_cast<int>(*max_completion_tokens);
  } else if (max_tokens.has_value()) {
    d.max_new_tokens = static_cast<int>(*max_tokens);
  } else {
    // No length asked for: a long prompt is not an error, generation stops at the context.
    d.max_new_tokens = limits.default_max_new_tokens;
    d.stop_at_context_limit = true;
  }

  if (r->endpoint == Endpoint::kChat) {
    std::optional<bool> logprobs;
    std::optional<int64_t> top;
    TG_RETURN_IF_ERROR(f.Bool("logprobs", &logprobs));
    TG_RETURN_IF_ERROR(f.Int("top_logprobs", 0, kMaxTopLogprobs, &top));
    r->logprobs = logprobs.value_or(false);
    if (top.has_value() && !r->logprobs) {
      return FieldError("top_logprobs", "needs logprobs: true");
    }
    r->top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    // Completions: logprobs is the number of alternatives (0 = the chosen tokens only).
    std::optional<int64_t> logprobs;
    TG_RETURN_IF_ERROR(f.Int("logprobs", 0, kMaxTopLogprobs, &logprobs));
    r->logprobs = logprobs.has_value();
    r->top_logprobs = static_cast<int>(logprobs.value_or(0));
  }
  d.top_logprobs = r->top_logprobs;
  return absl::OkStatus();
}

// A sampling-only field given a value that changes something, under a method that does not
// sample: refused rather than ignored.
absl::Status RefuseSamplingFields(const std::optional<double>& top_p,
                                  const std::optional<int64_t>& top_k,
                                  const std::optional<double>& min_p, const char* why) {
  if (top_p.has_value() && *top_p != 1) return FieldError("top_p", why);
  if (top_k.has_value() && *top_k > 0) return FieldError("top_k", why);
  if (min_p.has_value() && *min_p != 0) return FieldError("min_p", why);
  return absl::OkStatus();
}

// `speculative` (ours) and `prediction` ({"type": "content", "content": a string or text
// parts}); both change only the speed. Beam search ignores them.
absl::Status ParseSpeculation(const JsonFields& f, const RequestLimits& limits,
                              CompletionRequest* r) {
  std::optional<bool> speculative;
  TG_RETURN_IF_ERROR(f.Bool("speculative", &speculative));
  SpeculationOptions& s = r->decoding.speculation;
  s = limits.speculation;
  if (speculative.has_value()) {
    if (!*speculative) {
      s.source = DraftSource::kNone;
    } else if (s.source == DraftSource::kNone) {
      s.source = limits.asked_draft_source;
    }
  }
  const json* p = f.Get("prediction");
  if (p == nullptr) return absl::OkStatus();
  if (!p->is_object() || !p->contains("type") || (*p)["type"] != "content" ||
      !p->contains("content")) {
    return FieldError("prediction", R"(must be {"type": "content", "content": ...})");
  }
  json content;
  TG_RETURN_IF_ERROR(ParseContent(*p, "prediction.content", &content));
  r->prediction_text = content.get<std::string>();
  return CheckPromptBytes("prediction", r->prediction_text.size(), limits);
}

absl::Status ParseDecoding(const JsonFields& f, CompletionRequest* r) {
  std::optional<bool> use_beam, ignore_eos;
  std::optional<double> temperature, top_p, min_p, repetition_penalty, length_penalty;
  std::optional<int64_t> n, best_of, top_k, seed;
  TG_RETURN_IF_ERROR(f.Bool("use_beam_search", &use_beam));
  TG_RETURN_IF_ERROR(f.Number("temperature", 0, 2, false, &temperature));
  TG_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &top_p));
  TG_RETURN_IF_ERROR(f.Int("top_k", -1, std::numeric_limits<int32_t>::max(), &top_k));
  TG_RETURN_IF_ERROR(f.Number("min_p", 0, 1, false, &min_p));
  if (min_p.has_value() && *min_p >= 1) return FieldError("min_p", "must be in [0, 1), got 1");
  TG_RETURN_IF_ERROR(f.Number("repetition_penalty", 0, 10, true, &repetition_penalty));
  TG_RETURN_IF_ERROR(f.Int("seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(), &seed));
  TG_RETURN_IF_ERROR(f.Int("n", 1, kMaxChoices, &n));
  TG_RETURN_IF_ERROR(f.Int("best_of", 1, kMaxBeams, &best_of));
  TG_RETURN_IF_ERROR(f.Number("length_penalty", -10, 10, false, &length_penalty));
  TG_RETURN_IF_ERROR(f.Bool("ignore_eos", &ignore_eos));
  std::optional<EarlyStopping> early;
  if (const json* v = f.Get("early_stopping")) {
    if (v->is_boolean()) {
      early = v->get<bool>() ? EarlyStopping::kEarly : EarlyStopping::kHeuristic;
    } else if (*v == "never") {
      early = EarlyStopping::kNever;
    } else {
      return FieldError("early_stopping", "must be true, false or \"never\"");
    }
  }

  r->n = static_cast<int>(n.value_or(1));
  DecodingOptions& d = r->decoding;
  d.ignore_eos = ignore_eos.value_or(false);
  if (repetition_penalty.has_value()) {
    d.sampling.repetition_penalty = static_cast<float>(*repetition_penalty);
  }
  if (seed.has_value()) d.sampling.seed = static_cast<uint64_t>(*seed);

  if (use_beam.value_or(false)) {
    if (temperature.has_value() && *temperature != 0) {
      return FieldError("temperature", "must be 0 (or absent) with use_beam_search");
    }
    TG_RETURN_IF_ERROR(
        RefuseSamplingFields(top_p, top_k, min_p, "has no effect with use_beam_search"));
    if (r->top_logprobs > 0) {
      return FieldError(r->endpoint == Endpoint::kChat ? "top_logprobs" : "logprobs",
                        "alternatives are not reported with use_beam_search (only the chosen "
                        "tokens' logprobs)");
    }
    d.method = DecodingMethod::kBeam;
    BeamSearchOptions& b = d.beam;
    b.num_beams = static_cast<int>(best_of.value_or(r->n));
    if (r->n > b.num_beams) {
      return FieldError("n", absl::StrCat("must be at most best_of (the number of beams, ",
                                          b.num_beams, "), got ", r->n));
    }
    b.num_return_sequences = r->n;
    b.length_penalty = static_cast<float>(length_penalty.value_or(1.0));
    b.early_stopping = early.value_or(EarlyStopping::kHeuristic);
    b.max_new_tokens = d.max_new_tokens;
    b.ignore_eos = d.ignore_eos;
    return absl::OkStatus();
  }
  if (length_penalty.has_value()) return FieldError("length_penalty", "needs use_beam_search");
  if (early.has_value()) return FieldError("early_stopping", "needs use_beam_search");
  if (best_of.has_value() && *best_of != r->n) {
    return FieldError("best_of", "must equal n unless use_beam_search is set");
  }
  // OpenAI's default temperature is 1 (sampling); 0 is greedy.
  const double t = temperature.value_or(1.0);
  if (t == 0) {
    TG_RETURN_IF_ERROR(
        RefuseSamplingFields(top_p, top_k, min_p, "has no effect with temperature 0 (greedy)"));
    d.method = DecodingMethod::kGreedy;
    return absl::OkStatus();
  }
  d.method = DecodingMethod::kSample;
  SamplingParams& s = d.sampling;
  s.temperature = static_cast<float>(t);
  s.top_p = static_cast<float>(top_p.value_or(1.0));
  s.top_k = top_k.has_value() && *top_k > 0 ? static_cast<int>(*top_k) : 0;
  s.min_p = static_cast<float>(min_p.value_or(0.0));
  return absl::OkStatus();
}

absl::Status ParseChatOptions(const JsonFields& f, CompletionRequest* r) {
  std::optional<bool> agp;
  TG_RETURN_IF_ERROR(f.Bool("add_generation_prompt", &agp));
  r->chat.add_generation_prompt = agp.value_or(true);
  if (const json* kw = f.Get("chat_template_kwargs")) {
    if (!kw->is_object()) {
      return FieldError("chat_template_kwargs",
                        absl::StrCat("expected an object, got ", JsonTypeName(*kw)));
    }
    r->chat.template_kwargs = *kw;
  }
  return absl::OkStatus();
}

// The payload of a regex, choice or grammar format (`name` as the client spelled its field).
absl::Status ParseFormatPayload(const std::string& type, const json& v, const std::string& name,
                                OutputFormat* out) {
  out->field = name;
  if (type == "choice") {
    if (!v.is_array() || v.empty()) {
      return FieldError(name, "expected a non-empty array of strings");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        return FieldError(absl::StrCat(name, "[", i, "]"),
                          absl::StrCat("expected a string, got ", JsonTypeName(v[i])));
      }
      out->choices.push_back(v[i].get<std::string>());
    }
    out->kind = OutputFormat::Kind::kChoice;
    return absl::OkStatus();
  }
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
    return FieldError(name, absl::StrCat("expected a non-empty string, got ", JsonTypeName(v)));
  }
  out->text = v.get<std::string>();
  out->kind = type == "regex" ? OutputFormat::Kind::kRegex : OutputFormat::Kind::kGrammar;
  return absl::OkStatus();
}

// response_format: {"type": "text" | "json_object" | "json_schema" (with "json_schema": {"name",
// "schema", "strict"?, "description"?}) | "regex" (with "regex") | "choice" (with "choice") |
// "grammar" (with "grammar")}.
absl::Status ParseResponseFormat(const json& v, OutputFormat* out) {
  if (!v.is_object()) {
    return FieldError("response_format", absl::StrCat("expected an object, got ", JsonTypeName(v)));
  }
  JsonFields f(v, "response_format");
  std::optional<std::string> type;
  TG_RETURN_IF_ERROR(f.String("type", &type));
  if (!type.has_value()) return FieldError(f.Name("type"), "is required");
  const std::map<std::string, std::string> payload = {
      {"text", ""},       {"json_object", ""},  {"json_schema", "json_schema"},
      {"regex", "regex"}, {"choice", "choice"}, {"grammar", "grammar"}};
  auto it = payload.find(*type);
  if (it == payload.end()) {
    return FieldError(f.Name("type"), absl::StrCat("must be text, json_object, json_schema, regex, "
                                                   "choice or grammar, got \"",
                                                   *type, "\""));
  }
  for (const auto& [key, value] : v.items()) {
    if (key != "type" && key != it->second) return FieldError(f.Name(key), "unknown field");
  }
  if (*type == "text") return absl::OkStatus();
  if (*type == "json_object") {
    out->kind = OutputFormat::Kind::kJsonObject;
    return absl::OkStatus();
  }
  const json* p = f.Get(it->second);
  if (p == nullptr) return FieldError(f.Name(it->second), "is required");
  if (*type == "json_schema") {
    if (!p->is_object()) {
      return FieldError(f.Name("json_schema"),
                        absl::StrCat("expected an object, got ", JsonTypeName(*p)));
    }
    JsonFields s(*p, "response_format.json_schema");
    for (const auto& [key, value] : p->items()) {
      if (key != "name" && key != "schema" && key != "strict" && key != "description") {
        return FieldError(s.Name(key), "unknown field");
      }
    }
    std::optional<std::string> name, description;
    std::optional<bool> strict;
    TG_RETURN_IF_ERROR(s.String("name", &name));
    TG_RETURN_IF_ERROR(s.String("description", &description));
    // strict: false would let a server skip keywords; here every accepted keyword is enforced.
    TG_RETURN_IF_ERROR(s.Bool("strict", &strict));
    const json* schema = s.Get("schema");
    if (schema == nullptr) return FieldError(s.Name("schema"), "is required");
    out->kind = OutputFormat::Kind::kJsonSchema;
    out->schema = *schema;
    out->field = "response_format.json_schema.schema";
    return absl::OkStatus();
  }
  return ParseFormatPayload(*type, *p, f.Name(it->second), out);
}

absl::Status ParseOutputFormat(const json& body, CompletionRequest* r) {
  // Every spelling of one thing: at most one may be given.
  const char* kSpellings[] = {"response_format", "grammar",       "json_schema",   "guided_json",
                              "guided_regex",    "guided_choice", "guided_grammar"};
  const char* given = nullptr;
  for (const char* key : kSpellings) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (given != nullptr) {
      return FieldError(key, absl::StrCat("cannot be combined with ", given,
                                          " (both say what the "
                                          "output must be)"));
    }
    given = key;
  }
  if (given == nullptr) return absl::OkStatus();
  const json& v = body.at(given);
  const std::string key = given;
  OutputFormat& out = r->output;
  out.field = key;
  if (key == "response_format") return ParseResponseFormat(v, &out);
  if (key == "json_schema" || key == "guided_json") {
    if (!v.is_object() && !v.is_boolean()) {
      return FieldError(key, absl::StrCat("expected a JSON Schema object, got ", JsonTypeName(v)));
    }
    out.kind = OutputFormat::Kind::kJsonSchema;
    out.schema = v;
    return absl::OkStatus();
  }
  const std::string type = key == "guided_regex"    ? "regex"
                           : key == "guided_choice" ? "choice"
                                                    : "grammar";
  return ParseFormatPayload(type, v, key, &out);
}

absl::Status ParseTools(const json& body, CompletionRequest* r) {
  ChatTurn& chat = r->chat;
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    absl::StatusOr<std::vector<ToolSpec>> parsed = textgen::ParseTools(nlohmann::json(*tools));
    if (!parsed.ok()) return WithParam(parsed.status(), "tools");
    chat.tools = *std::move(parsed);
  }
  auto choice = body.find("tool_choice");
  absl::StatusOr<ToolChoice> tc = textgen::ParseToolChoice(
      choice != body.end() ? nlohmann::json(*choice) : nlohmann::json(), chat.tools);
  if (!tc.ok()) return WithParam(tc.status(), "tool_choice");
  chat.tool_choice = *tc;
  JsonFields f(body, "");
  std::optional<bool> parallel;
  TG_RETURN_IF_ERROR(f.Bool("parallel_tool_calls", &parallel));
  chat.parallel_tool_calls = parallel.value_or(true);
  return absl::OkStatus();
}

absl::Status ParseReasoning(const JsonFields& f, CompletionRequest* r) {
  std::optional<std::string> format;
  TG_RETURN_IF_ERROR(f.String("reasoning_format", &format));
  if (format.has_value()) {
    if (*format == "separate" || *format == "deepseek" || *format == "auto") {
      r->chat.reasoning_format = ReasoningFormat::kSeparate;
    } else if (*format == "raw" || *format == "none") {
      r->chat.reasoning_format = ReasoningFormat::kRaw;
    } else {
      return FieldError("reasoning_format", absl::StrCat("must be separate or raw, got "
                                                         ", *format, "
                                                         ""));
    }
  }
  std::optional<int64_t> budget;
  TG_RETURN_IF_ERROR(f.Int("reasoning_budget", 0, std::numeric_limits<int32_t>::max(), &budget));
  if (budget.has_value()) r->chat.reasoning_budget = static_cast<int>(*budget);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(Endpoint endpoint, std::string_view body,
                                                         const RequestLimits& limits) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body must be a JSON object, got ", JsonTypeName(j)));
  }
  TG_RETURN_IF_ERROR(CheckFields(endpoint, j));
  CompletionRequest r;
  r.endpoint = endpoint;
  JsonFields f(j, "");
  std::optional<std::string> model;
  TG_RETURN_IF_ERROR(f.String("model", &model));
  r.model = model.value_or("");
  std::optional<std::string> user;
  TG_RETURN_IF_ERROR(f.String("user", &user));
  if (endpoint == Endpoint::kChat) {
    TG_RETURN_IF_ERROR(ParseMessages(j, &r));
    TG_RETURN_IF_ERROR(ParseChatOptions(f, &r));
    TG_RETURN_IF_ERROR(ParseTools(j, &r));
    TG_RETURN_IF_ERROR(ParseReasoning(f, &r));
  } else {
    TG_RETURN_IF_ERROR(ParsePrompt(j, &r));
  }
  TG_RETURN_IF_ERROR(CheckTextBytes(r, limits));
  TG_RETURN_IF_ERROR(ParseStreamOptions(f, &r));
  TG_RETURN_IF_ERROR(ParseStop(f, &r.decoding.stop));
  TG_RETURN_IF_ERROR(ParseLengthAndLogprobs(f, limits, &r));
  TG_RETURN_IF_ERROR(ParseDecoding(f, &r));
  TG_RETURN_IF_ERROR(ParseSpeculation(f, limits, &r));
  TG_RETURN_IF_ERROR(ParseOutputFormat(j, &r));
  return r;
}

}  // namespace textgen::server::openai
