#include "server/openai/completion_json.h"

#include <utility>

#include "server/response_convert.h"

namespace textgen::server::openai {
namespace {

using json = nlohmann::ordered_json;

bool IsChat(const CompletionRequest& r) { return r.endpoint == Endpoint::kChat; }

// OpenAI's assistant message: content (null when the answer is only tool calls),
// reasoning_content when there was reasoning, tool_calls when it made calls.
json MessageJson(const AssistantMessage& m) {
  json j = {{"role", "assistant"}};
  j["content"] =
      m.content.empty() && !m.tool_calls.empty() ? json(nullptr) : json(ValidUtf8(m.content));
  if (!m.reasoning.empty()) j["reasoning_content"] = ValidUtf8(m.reasoning);
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ParsedToolCall& c : m.tool_calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", ValidUtf8(c.arguments)}}}});
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

json ByteArray(std::string_view bytes) {
  json a = json::array();
  for (char c : bytes) a.push_back(static_cast<unsigned char>(c));
  return a;
}

}  // namespace

const char* OpenAiFinishReason(AnswerEnd end) {
  switch (end) {
    case AnswerEnd::kLength:
      return "length";
    case AnswerEnd::kToolCalls:
      return "tool_calls";
    case AnswerEnd::kStop:
    case AnswerEnd::kCancelled:
      return "stop";
  }
  return "stop";
}

json UsageJson(const CompletionUsage& usage) {
  json u = {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
  if (usage.drafted_tokens > 0) {
    // OpenAI's Predicted Outputs fields, for every draft source: drafted tokens the answer kept,
    // and those it did not (they cost a verification row, not a decode step).
    u["completion_tokens_details"] = {
        {"accepted_prediction_tokens", usage.accepted_tokens},
        {"rejected_prediction_tokens", usage.drafted_tokens - usage.accepted_tokens}};
  }
  return u;
}

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

CompletionJson::CompletionJson(const CompletionRequest& request, std::string id, int64_t created,
                               std::string model, const Tokenizer& tokenizer)
    : request_(request),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      tokenizer_(tokenizer) {}

json CompletionJson::Envelope(bool chunk) const {
  const char* object =
      IsChat(request_) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  json j = {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
  // OpenAI sends "usage": null on every chunk when the last one will carry it.
  if (chunk && request_.include_usage) j["usage"] = nullptr;
  return j;
}

json CompletionJson::ChatTokenLogprob(int32_t id, double logprob) const {
  const std::string_view bytes = tokenizer_.TokenBytes(id);
  return {{"token", ValidUtf8(bytes)}, {"logprob", logprob}, {"bytes", ByteArray(bytes)}};
}

json CompletionJson::Logprobs(absl::Span<const GeneratedToken> tokens, ChoiceText& choice) const {
  if (!request_.logprobs) return nullptr;
  if (IsChat(request_)) {
    json content = json::array();
    for (const GeneratedToken& t : tokens) {
      json entry = ChatTokenLogprob(t.id, t.logprob);
      json top = json::array();
      for (const TokenLogprob& alt : t.top) top.push_back(ChatTokenLogprob(alt.id, alt.logprob));
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const GeneratedToken& t : tokens) {
    const std::string_view bytes = tokenizer_.TokenBytes(t.id);
    out["tokens"].push_back(ValidUtf8(bytes));
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : t.top) {
      // Two alternatives may show as the same text (partial UTF-8): keep the likelier.
      const std::string key = ValidUtf8(tokenizer_.TokenBytes(alt.id));
      if (!top.contains(key)) top[key] = alt.logprob;
    }
    out["top_logprobs"].push_back(request_.top_logprobs > 0 ? std::move(top) : json(nullptr));
    out["text_offset"].push_back(choice.text_offset);
    choice.text_offset += bytes.size();
  }
  return out;
}

// One choice of a chunk in OpenAI's key order: index, delta (chat) or text, logprobs,
// finish_reason.
json CompletionJson::ChunkChoice(int index, json content, json logprobs, json finish) const {
  json c = {{"index", index}};
  c[IsChat(request_) ? "delta" : "text"] = std::move(content);
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = std::move(finish);
  json j = Envelope(true);
  j["choices"] = json::array({std::move(c)});
  return j;
}

json CompletionJson::RoleChunk(int index) const {
  json content = IsChat(request_) ? json{{"role", "assistant"}, {"content", ""}} : json("");
  return ChunkChoice(index, std::move(content), nullptr, nullptr);
}

json CompletionJson::DeltaChunk(int index, std::string_view text,
                                absl::Span<const GeneratedToken> tokens, ChoiceText& choice) const {
  json content = IsChat(request_) ? json{{"content", ValidUtf8(text)}} : json(ValidUtf8(text));
  return ChunkChoice(index, std::move(content), Logprobs(tokens, choice), nullptr);
}

json CompletionJson::EventChunk(int index, const AssistantOutputEvent& e,
                                absl::Span<const GeneratedToken> tokens, ChoiceText& choice) const {
  using Type = AssistantOutputEvent::Type;
  json delta = json::object();
  switch (e.type) {
    case Type::kContent:
      delta["content"] = ValidUtf8(e.text);
      break;
    case Type::kReasoning:
      delta["reasoning_content"] = ValidUtf8(e.text);
      break;
    case Type::kToolCallBegin:
      delta["tool_calls"] = json::array({{{"index", e.tool_index},
                                          {"id", e.id},
                                          {"type", "function"},
                                          {"function", {{"name", e.name}, {"arguments", ""}}}}});
      break;
    case Type::kToolCallArguments:
      delta["tool_calls"] = json::array(
          {{{"index", e.tool_index}, {"function", {{"arguments", ValidUtf8(e.text)}}}}});
      break;
    case Type::kToolCallEnd:
      break;
  }
  return ChunkChoice(index, std::move(delta), Logprobs(tokens, choice), nullptr);
}

json CompletionJson::FinishChunk(int index, AnswerEnd end) const {
  json content = IsChat(request_) ? json::object() : json("");
  return ChunkChoice(index, std::move(content), nullptr, OpenAiFinishReason(end));
}

json CompletionJson::UsageChunk(const CompletionUsage& usage) const {
  json j = Envelope(true);
  j["choices"] = json::array();
  j["usage"] = UsageJson(usage);
  return j;
}

json CompletionJson::Whole(std::vector<ChoiceText>& choices, const CompletionUsage& usage) const {
  json j = Envelope(false);
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    ChoiceText& choice = choices[i];
    choice.text_offset = 0;
    json c = {{"index", i}};
    if (IsChat(request_)) {
      c["message"] = MessageJson(choice.answer.message());
    } else {
      c["text"] = ValidUtf8(choice.text);
    }
    c["logprobs"] = Logprobs(choice.tokens, choice);
    c["finish_reason"] = OpenAiFinishReason(choice.end.value_or(AnswerEnd::kLength));
    list.push_back(std::move(c));
  }
  j["choices"] = std::move(list);
  j["usage"] = UsageJson(usage);
  return j;
}

}  // namespace textgen::server::openai
