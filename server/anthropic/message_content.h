// Anthropic's conversation (the top-level `system` and `messages` of /v1/messages) -> the
// template's messages (ChatTurn::messages: OpenAI / Hugging Face shape).
//
// Mapping decisions (docs/api-http.md, "Anthropic Messages API"):
// - `system` (a string or text blocks) becomes one leading system message; text blocks of one
//   message are concatenated as they are (no separator), as the OpenAI front joins text parts.
// - user text blocks -> a user message; each tool_result block -> a {"role": "tool",
//   "tool_call_id", "name", "content"} message, in block order (text before a tool_result is a
//   user message before it). A tool_result must answer a tool_use of an earlier assistant
//   message; its content is a string or text blocks, and is_error: true prefixes "Error: ".
// - assistant text -> content ("" when there is none: Qwen3's template raises on null);
//   tool_use blocks -> tool_calls with the input as an object (what templates take); thinking
//   blocks -> reasoning_content; redacted_thinking blocks are
//   dropped (their data is another service's encrypted reasoning, unreadable here).
// - Refused with a FieldError naming the block: image, document and other non-text blocks
//   ("not supported"), thinking or tool_use in a user message, tool_result in an assistant
//   message, unknown keys, a "system" role in `messages`, and a final assistant message
//   (Anthropic's prefill, which this server cannot continue).
// - cache_control on blocks is accepted (validated): the prefix cache reuses prompts anyway.
#ifndef TEXTGEN_SERVER_ANTHROPIC_MESSAGE_CONTENT_H_
#define TEXTGEN_SERVER_ANTHROPIC_MESSAGE_CONTENT_H_

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace textgen::server::anthropic {

// Converts `body`'s system and messages, appending to `*messages` (an array). `*text_bytes` gets
// the bytes of every text the conversation holds (for the prompt size limit). FieldError
// (InvalidArgument) naming the field path ("messages[2].content[0].type") for anything refused.
absl::Status ConvertConversation(const nlohmann::ordered_json& body,
                                 nlohmann::ordered_json* messages, size_t* text_bytes);

// Validates a cache_control value ({"type": "ephemeral", "ttl"?: "5m" | "1h"}) at `name`.
absl::Status CheckCacheControl(const nlohmann::ordered_json& value, const std::string& name);

// The request's shared checks: every key of `object` one of `allowed` (else "NAME.KEY: unknown
// field"); `value` an object (else "NAME: expected an object, got ...").
absl::Status CheckKeys(const nlohmann::ordered_json& object, const std::string& name,
                       std::initializer_list<std::string_view> allowed);
absl::Status ExpectObject(const nlohmann::ordered_json& value, const std::string& name);

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_MESSAGE_CONTENT_H_
