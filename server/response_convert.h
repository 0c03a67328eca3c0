// Engine results -> API messages. Every string that goes into a proto is valid UTF-8
// (protobuf refuses to serialize anything else), whatever bytes the tokens decode to.
#ifndef TEXTGEN_SERVER_RESPONSE_CONVERT_H_
#define TEXTGEN_SERVER_RESPONSE_CONVERT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/chat/assistant_message.h"
#include "engine/decoding/generation.h"
#include "engine/tokenizer/tokenizer.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

v1::FinishReason ToProtoFinishReason(FinishReason reason);

// `text` itself when it is valid UTF-8, else each ill-formed part replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// Appends one generated token (id, text, logprob, top alternatives with their text).
void AppendToken(const GeneratedToken& token, const Tokenizer& tokenizer, v1::Token* out);

// Appends a streamed delta's tokens and text to `out` (so several deltas can share a message).
void AppendDelta(const StreamDelta& delta, const Tokenizer& tokenizer, v1::GenerateResponse* out);

// Appends an answer's pieces: content to text, reasoning to reasoning_text, tool-call pieces to
// tool_calls (an arguments piece of the call the last delta is about extends it).
void AppendAnswerEvents(const std::vector<AssistantOutputEvent>& events, v1::GenerateResponse* out);

// Sets a hypothesis' text, reasoning and tool calls from its parsed message (Chat with tools or
// a thinking model), and TOOL_CALLS as its finish reason when it made calls.
void SetParsedAnswer(const AssistantMessage& message, bool made_tool_calls, v1::Hypothesis* out);

// The last message of a stream: finish_reason, hypotheses (best first) and usage. The stream
// so far carried `streamed_tokens` tokens and `streamed_text`; if that is a prefix of the best
// hypothesis (beam search streams only the part all beams agree on), the rest of its tokens
// and text are added, so a client that concatenates the stream always gets the best answer.
void FillFinalResponse(const GenerationResult& result, const Tokenizer& tokenizer,
                       size_t streamed_tokens, std::string_view streamed_text,
                       v1::GenerateResponse* out);

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_RESPONSE_CONVERT_H_
