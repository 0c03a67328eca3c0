// The pipeline's stream assembler for one answer (one choice): the engine's text deltas in, the
// answer's pieces out — content, reasoning and tool-call pieces — as each becomes certain, with
// the markup never in the content. Every front end turns these pieces into its own wire format
// (OpenAI chunks, Anthropic content blocks, gRPC messages), so they cannot disagree on what the
// model said.
#ifndef TEXTGEN_SERVER_PIPELINE_ANSWER_STREAM_H_
#define TEXTGEN_SERVER_PIPELINE_ANSWER_STREAM_H_

#include <memory>
#include <string_view>
#include <vector>

#include "engine/chat/assistant_message.h"
#include "engine/chat/assistant_output_parser.h"
#include "engine/decoding/decoding_options.h"
#include "server/pipeline/prompt_preparer.h"

namespace textgen::server {

// Not thread-safe; one per choice.
class AnswerStream {
 public:
  // A plain answer (completions, Generate, or a chat with nothing to parse): text passes
  // through as content.
  AnswerStream() = default;
  explicit AnswerStream(const AnswerPlan& plan);

  // Appends the pieces `text` (an engine delta's text) makes certain.
  void Feed(std::string_view text, std::vector<AssistantOutputEvent>* out);
  // The answer ended: appends what was held back. Call once.
  void Finish(std::vector<AssistantOutputEvent>* out);

  // Everything reported so far, summed.
  const AssistantMessage& message() const { return message_; }
  // Whether the answer made a (complete) tool call: its finish reason is then "tool_calls".
  bool made_tool_calls() const;
  bool finished() const { return finished_; }

 private:
  std::unique_ptr<AssistantOutputParser> parser_;  // null: pass-through
  AssistantMessage message_;
  bool finished_ = false;
};

// The answer's finish reason as the APIs report it: "tool_calls" when it made calls, else the
// engine's.
enum class AnswerEnd { kStop, kLength, kToolCalls, kCancelled };
AnswerEnd AnswerEndOf(FinishReason engine_reason, bool made_tool_calls);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PIPELINE_ANSWER_STREAM_H_
