// The gRPC front end's request conversion onto the pipeline: ChatRequest -> ChatTurn (messages
// with their tool calls and reasoning, tools, tool choice, response_format, reasoning options),
// prepared by the PromptPreparer into an EngineRequest and the plan for reading its answer; and
// GenerateRequest's response_format into its constraint.
//
// With a session, the session's attachment (owned by the engine, so that expiry and
// DeleteSession need nothing here) holds the conversation's messages as a JSON array: a turn
// adds its messages, renders the whole conversation, and the engine reuses the K/V of the token
// prefix it shares with the previous turn (SessionPrompt::kWhole); when the turn ends, the answer
// (content, reasoning and tool calls, as the template takes an assistant message) is added.
#ifndef TEXTGEN_SERVER_CHAT_PROMPTER_H_
#define TEXTGEN_SERVER_CHAT_PROMPTER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/scheduler/engine.h"
#include "nlohmann/json.hpp"
#include "server/pipeline/prompt_preparer.h"
#include "server/request_convert.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

// An engine request and how to read its answer.
struct PreparedGeneration {
  EngineRequest request;
  AnswerPlan answer;  // default: the text passes through
};

// The request's messages as the template sees them ([{"role", "content", "name"?,
// "tool_call_id"?, "tool_calls"?, "reasoning_content"?}]). InvalidArgument naming the message
// for an empty list, an unknown role, or tool-call arguments that are not a JSON object.
absl::StatusOr<nlohmann::ordered_json> ChatMessagesToJson(const v1::ChatRequest& request);

// template_kwargs as a JSON object (whole numbers become integers, as Python's json would
// give them). InvalidArgument for a name the server sets itself.
absl::StatusOr<nlohmann::ordered_json> TemplateKwargsToJson(const v1::ChatRequest& request);

// The request's response_format, unset: kText. `field` names it in errors.
absl::StatusOr<OutputFormat> ToOutputFormat(const v1::ResponseFormat& format, bool has_format,
                                            const std::string& field);

// The bytes of text in the request's messages (what the prompt size limit counts).
size_t ChatTextBytes(const v1::ChatRequest& request);

// Whether preparing the request compiles a grammar or renders tools (work for a prompt worker).
bool ChatNeedsWork(const v1::ChatRequest& request);

// Immutable; Build is safe to call concurrently.
class ChatPrompter {
 public:
  // Borrows `preparer`, which must outlive it.
  explicit ChatPrompter(const PromptPreparer* preparer) : preparer_(preparer) {}

  // InvalidArgument for bad messages, kwargs, tools, response formats or decoding fields (see
  // ToDecodingOptions), for messages over limits.max_prompt_bytes (before any rendering), for a
  // template that raises (its message) and for a malformed session_id; NotFound for an unknown
  // session or one `owner` (the caller's principal) did not create; FailedPrecondition without
  // a template.
  absl::StatusOr<PreparedGeneration> Build(const Engine& engine, const v1::ChatRequest& request,
                                           const RequestLimits& limits,
                                           const std::string& owner = "") const;

  // Generate: the converted request with its response_format's constraint.
  absl::StatusOr<PreparedGeneration> BuildGenerate(const v1::GenerateRequest& request,
                                                   const RequestLimits& limits) const;

 private:
  const PromptPreparer* preparer_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_CHAT_PROMPTER_H_
