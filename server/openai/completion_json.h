// OpenAI's response shapes for chat and text completions, whole and streamed:
//   chat:        "chat.completion" / "chat.completion.chunk" objects, choices[].message or
//                choices[].delta, logprobs {"content": [{token, logprob, bytes, top_logprobs}]}
//   completions: "text_completion" objects (whole and chunks), choices[].text, logprobs
//                {tokens, token_logprobs, top_logprobs, text_offset}
// plus usage {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details:
// {cached_tokens}}. A token's text in logprobs is its own bytes (the vocabulary piece), shown
// as valid UTF-8, with the raw bytes in `bytes` (chat); text_offset counts bytes of the
// generated text.
#ifndef TEXTGEN_SERVER_OPENAI_COMPLETION_JSON_H_
#define TEXTGEN_SERVER_OPENAI_COMPLETION_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/decoding/generation.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/openai/completion_request.h"
#include "server/pipeline/answer_stream.h"

namespace textgen::server::openai {

struct CompletionUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;  // over every choice
  int cached_tokens = 0;
  int drafted_tokens = 0;   // speculative decoding, over every choice
  int accepted_tokens = 0;  // of those, kept
};

// "stop" (EOS, end-of-generation token, stop string, a complete constraint), "length"
// (max_tokens, context full) or "tool_calls".
const char* OpenAiFinishReason(AnswerEnd end);

// One choice's output so far (the whole of it once finished).
struct ChoiceText {
  std::string text;  // the engine's text (markup included)
  std::vector<GeneratedToken> tokens;
  size_t text_offset = 0;  // completions' logprobs: bytes of token texts reported so far
  AnswerStream answer;     // the text read as content, reasoning and tool calls
  std::optional<AnswerEnd> end;
};

// Builds the JSON objects of one response. Not thread-safe; one per request.
class CompletionJson {
 public:
  CompletionJson(const CompletionRequest& request, std::string id, int64_t created,
                 std::string model, const Tokenizer& tokenizer);

  // A chunk opening choice `index` (chat: delta {role: assistant, content: ""}).
  nlohmann::ordered_json RoleChunk(int index) const;
  // A chunk carrying new text and the tokens behind it; advances choice.text_offset.
  nlohmann::ordered_json DeltaChunk(int index, std::string_view text,
                                    absl::Span<const GeneratedToken> tokens,
                                    ChoiceText& choice) const;
  // A chat chunk carrying one piece of the answer (content, reasoning_content, or a tool call's
  // opening or arguments) and, when given, the tokens behind it.
  nlohmann::ordered_json EventChunk(int index, const AssistantOutputEvent& event,
                                    absl::Span<const GeneratedToken> tokens,
                                    ChoiceText& choice) const;
  // The chunk ending choice `index` (empty delta / text, finish_reason set).
  nlohmann::ordered_json FinishChunk(int index, AnswerEnd end) const;
  // stream_options.include_usage: the last chunk, with no choices.
  nlohmann::ordered_json UsageChunk(const CompletionUsage& usage) const;
  // The non-streamed response (choices[i].finish must be set).
  nlohmann::ordered_json Whole(std::vector<ChoiceText>& choices,
                               const CompletionUsage& usage) const;

 private:
  nlohmann::ordered_json Envelope(bool chunk) const;
  nlohmann::ordered_json ChunkChoice(int index, nlohmann::ordered_json content,
                                     nlohmann::ordered_json logprobs,
                                     nlohmann::ordered_json finish) const;
  nlohmann::ordered_json Logprobs(absl::Span<const GeneratedToken> tokens,
                                  ChoiceText& choice) const;
  nlohmann::ordered_json ChatTokenLogprob(int32_t id, double logprob) const;

  const CompletionRequest& request_;
  const std::string id_;
  const int64_t created_;
  const std::string model_;
  const Tokenizer& tokenizer_;
};

nlohmann::ordered_json UsageJson(const CompletionUsage& usage);

// `j` as compact JSON; invalid UTF-8 (never expected) replaced rather than thrown on.
std::string DumpJson(const nlohmann::ordered_json& j);

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_COMPLETION_JSON_H_
