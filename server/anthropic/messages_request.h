// The JSON body of Anthropic's POST /v1/messages and /v1/messages/count_tokens -> a ChatTurn
// and the decoding options.
//
// Every field is applied or refused by name (a FieldError, 400 invalid_request_error), never
// ignored: model (required), max_tokens (required; create only), system and messages
// (message_content.h), tools ({name, description, input_schema, cache_control, type: "custom",
// strict}; server tools refused), tool_choice (auto, any = required, tool = named, none;
// disable_parallel_tool_use), stop_sequences, temperature (0..1, default 1; 0 is greedy), top_p,
// top_k, stream, metadata ({user_id}: accepted, no effect), cache_control (validated; the
// prefix cache reuses prompts anyway), output_config.format (json_schema, enforced), and
// thinking:
//   {type: "enabled", budget_tokens: N} -> the reasoning block reported as thinking blocks, at
//       most N tokens (then closed), chat_template_kwargs enable_thinking: true; N < max_tokens.
//   {type: "adaptive"} -> the same without a budget of its own (the server's default).
//   {type: "disabled"} -> enable_thinking: false and a reasoning budget of 0: a block the model
//       opens is closed at once, so the answer has no thinking block.
//   absent -> the server's defaults (--reasoning-format, --reasoning-budget).
// Known fields this server cannot honour (service_tier, container, mcp_servers, ...) are
// refused unless null; any other field is "unknown".
#ifndef TEXTGEN_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_
#define TEXTGEN_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/decoding/decoding_options.h"
#include "server/pipeline/chat_turn.h"
#include "server/request_convert.h"

namespace textgen::server::anthropic {

enum class MessagesRoute {
  kCreate,       // POST /v1/messages
  kCountTokens,  // POST /v1/messages/count_tokens: no max_tokens, sampling or stream fields
};

struct MessagesRequest {
  std::string model;
  bool stream = false;
  ChatTurn chat;
  // kCreate: max_new_tokens = max_tokens, stop = stop_sequences, the method and sampling.
  DecodingOptions decoding;
  // thinking enabled or adaptive: the model's template must have a reasoning block.
  bool thinking_requested = false;
};

// Parses and checks `body`; FieldError (400) naming the field for anything refused.
absl::StatusOr<MessagesRequest> ParseMessagesRequest(MessagesRoute route, std::string_view body,
                                                     const RequestLimits& limits);

// A pipeline error (PromptPreparer) with OpenAI's field names in its message rewritten to this
// API's: "tools[2].function.parameters" -> "tools[2].input_schema", "response_format" ->
// "output_config.format", "reasoning_budget" -> "thinking.budget_tokens". Same code.
absl::Status ToAnthropicNames(const absl::Status& status);

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_MESSAGES_REQUEST_H_
