#include "server/response_convert.h"

#include "engine/tokenizer/unicode.h"

namespace textgen::server {

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return v1::LENGTH;
    case FinishReason::kEos:
      return v1::EOS;
    case FinishReason::kStopSequence:
      return v1::STOP_SEQUENCE;
    case FinishReason::kContextFull:
      return v1::CONTEXT_FULL;
    case FinishReason::kCancelled:
      return v1::CANCELLED;
    case FinishReason::kConstraintComplete:
      return v1::CONSTRAINT_COMPLETE;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  return SanitizeUtf8(text);
}

void AppendToken(const GeneratedToken& token, const Tokenizer& tokenizer, v1::Token* out) {
  out->set_id(token.id);
  out->set_text(ValidUtf8(token.text));
  out->set_logprob(token.logprob);
  for (const TokenLogprob& alt : token.top) {
    v1::TopLogprob* t = out->add_top_logprobs();
    t->set_id(alt.id);
    // A lone byte-fallback token is part of a character: shown as U+FFFD.
    t->set_text(ValidUtf8(tokenizer.TokenBytes(alt.id)));
    t->set_logprob(alt.logprob);
  }
}

void AppendDelta(const StreamDelta& delta, const Tokenizer& tokenizer, v1::GenerateResponse* out) {
  for (const GeneratedToken& t : delta.tokens) AppendToken(t, tokenizer, out->add_tokens());
  out->mutable_text()->append(ValidUtf8(delta.text));
}

void AppendAnswerEvents(const std::vector<AssistantOutputEvent>& events,
                        v1::GenerateResponse* out) {
  using Type = AssistantOutputEvent::Type;
  for (const AssistantOutputEvent& e : events) {
    switch (e.type) {
      case Type::kContent:
        out->mutable_text()->append(ValidUtf8(e.text));
        break;
      case Type::kReasoning:
        out->mutable_reasoning_text()->append(ValidUtf8(e.text));
        break;
      case Type::kToolCallBegin: {
        v1::ToolCallDelta* d = out->add_tool_calls();
        d->set_index(static_cast<uint32_t>(e.tool_index));
        d->set_id(e.id);
        d->set_name(e.name);
        break;
      }
      case Type::kToolCallArguments: {
        const int n = out->tool_calls_size();
        v1::ToolCallDelta* d =
            n > 0 && out->tool_calls(n - 1).index() == static_cast<uint32_t>(e.tool_index)
                ? out->mutable_tool_calls(n - 1)
                : out->add_tool_calls();
        d->set_index(static_cast<uint32_t>(e.tool_index));
        d->mutable_arguments()->append(ValidUtf8(e.text));
        break;
      }
      case Type::kToolCallEnd:
        break;
    }
  }
}

void SetParsedAnswer(const AssistantMessage& message, bool made_tool_calls, v1::Hypothesis* out) {
  out->set_text(ValidUtf8(message.content));
  out->set_reasoning(ValidUtf8(message.reasoning));
  out->clear_tool_calls();
  for (const ParsedToolCall& c : message.tool_calls) {
    v1::ToolCall* t = out->add_tool_calls();
    t->set_id(c.id);
    t->set_name(c.name);
    t->set_arguments(ValidUtf8(c.arguments));
  }
  if (made_tool_calls &&
      (out->finish_reason() == v1::EOS || out->finish_reason() == v1::STOP_SEQUENCE ||
       out->finish_reason() == v1::CONSTRAINT_COMPLETE)) {
    out->set_finish_reason(v1::TOOL_CALLS);
  }
}

void FillFinalResponse(const GenerationResult& result, const Tokenizer& tokenizer,
                       size_t streamed_tokens, std::string_view streamed_text,
                       v1::GenerateResponse* out) {
  out->set_finish_reason(ToProtoFinishReason(result.finish_reason));
  for (const Hypothesis& h : result.hypotheses) {
    v1::Hypothesis* p = out->add_hypotheses();
    p->mutable_ids()->Add(h.ids.begin(), h.ids.end());
    p->set_text(ValidUtf8(h.text));
    p->set_score(h.score);
    p->set_cum_logprob(h.cum_logprob);
    p->set_finish_reason(ToProtoFinishReason(h.finish_reason));
  }
  if (!result.hypotheses.empty()) {
    const std::string best_text = ValidUtf8(result.hypotheses.front().text);
    if (best_text.starts_with(streamed_text)) {
      for (size_t i = streamed_tokens; i < result.tokens.size(); ++i) {
        AppendToken(result.tokens[i], tokenizer, out->add_tokens());
      }
      out->set_text(best_text.substr(streamed_text.size()));
    }
  }
  v1::Usage* u = out->mutable_usage();
  const GenerationStats& s = result.stats;
  u->set_prompt_tokens(static_cast<uint32_t>(s.prompt_tokens));
  u->set_generated_tokens(static_cast<uint32_t>(s.generated_tokens));
  u->set_cached_tokens(static_cast<uint32_t>(s.cached_tokens));
  u->set_time_to_first_token_ms(s.time_to_first_token_s * 1e3);
  u->set_total_ms(s.total_s * 1e3);
  u->set_drafted_tokens(static_cast<uint32_t>(s.drafted_tokens));
  u->set_accepted_tokens(static_cast<uint32_t>(s.accepted_tokens));
}

}  // namespace textgen::server
