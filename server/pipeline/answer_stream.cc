#include "server/pipeline/answer_stream.h"

namespace textgen::server {

AnswerStream::AnswerStream(const AnswerPlan& plan) {
  if (plan.parse) parser_ = std::make_unique<AssistantOutputParser>(plan.options);
}

void AnswerStream::Feed(std::string_view text, std::vector<AssistantOutputEvent>* out) {
  if (text.empty() || finished_) return;
  const size_t first = out->size();
  if (parser_ == nullptr) {
    AssistantOutputEvent e;
    e.type = AssistantOutputEvent::Type::kContent;
    e.text = std::string(text);
    out->push_back(std::move(e));
  } else {
    parser_->Feed(text, out);
  }
  for (size_t i = first; i < out->size(); ++i) message_.Apply((*out)[i]);
}

void AnswerStream::Finish(std::vector<AssistantOutputEvent>* out) {
  if (finished_) return;
  finished_ = true;
  if (parser_ == nullptr) return;
  const size_t first = out->size();
  parser_->Finish(out);
  for (size_t i = first; i < out->size(); ++i) message_.Apply((*out)[i]);
}

bool AnswerStream::made_tool_calls() const {
  for (const ParsedToolCall& c : message_.tool_calls) {
    if (c.complete) return true;
  }
  return false;
}

AnswerEnd AnswerEndOf(FinishReason engine_reason, bool made_tool_calls) {
  switch (engine_reason) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return AnswerEnd::kLength;
    case FinishReason::kCancelled:
      return AnswerEnd::kCancelled;
    case FinishReason::kEos:
    case FinishReason::kStopSequence:
    case FinishReason::kConstraintComplete:
      return made_tool_calls ? AnswerEnd::kToolCalls : AnswerEnd::kStop;
  }
  return AnswerEnd::kStop;
}

}  // namespace textgen::server
