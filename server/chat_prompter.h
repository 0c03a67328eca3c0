// ChatRequest (the API) -> EngineRequest: checks the messages, renders the conversation with
// the chat template and tokenizes it. With a session, the session's attachment (owned by the
// engine, so that expiry and DeleteSession need nothing here) holds the conversation's
// messages as a JSON array: a turn adds its messages, renders the whole conversation, and the
// engine reuses the K/V of the token prefix it shares with the previous turn
// (SessionPrompt::kWhole); when the turn ends, the answer is added to the attachment.
#ifndef TEXTGEN_SERVER_CHAT_PROMPTER_H_
#define TEXTGEN_SERVER_CHAT_PROMPTER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/chat/model_chat_template.h"
#include "engine/scheduler/engine.h"
#include "nlohmann/json.hpp"
#include "server/request_convert.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

// The request's messages as the template sees them ([{"role", "content", "name"?,
// "tool_call_id"?}]). InvalidArgument naming the message for an empty list or an unknown role.
absl::StatusOr<nlohmann::ordered_json> ChatMessagesToJson(const v1::ChatRequest& request);

// template_kwargs as a JSON object (whole numbers become integers, as Python's json would
// give them). InvalidArgument for a name the server sets itself.
absl::StatusOr<nlohmann::ordered_json> TemplateKwargsToJson(const v1::ChatRequest& request);

// The bytes of text in the request's messages (what the prompt size limit counts).
size_t ChatTextBytes(const v1::ChatRequest& request);

// Immutable; Build is safe to call concurrently.
class ChatPrompter {
 public:
  // `chat_template`: the loaded template, or why there is none (every Build then fails with
  // FailedPrecondition carrying that message).
  explicit ChatPrompter(absl::StatusOr<ModelChatTemplate> chat_template);

  // InvalidArgument for bad messages, kwargs or decoding fields (see ToDecodingOptions), for
  // messages over limits.max_prompt_bytes (before any rendering), for a template that raises
  // (its message) and for a malformed session_id; NotFound for an unknown session or one
  // `owner` (the caller's principal) did not create; FailedPrecondition without a template.
  absl::StatusOr<EngineRequest> Build(const Engine& engine, const v1::ChatRequest& request,
                                      const RequestLimits& limits,
                                      const std::string& owner = "") const;

 private:
  absl::StatusOr<ModelChatTemplate> template_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_CHAT_PROMPTER_H_
