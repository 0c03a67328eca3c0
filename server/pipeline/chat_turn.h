// One chat request as every front end hands it to the pipeline (OpenAI's /v1/chat/completions,
// Anthropic's /v1/messages and the gRPC Chat RPC each parse their wire format into this):
// the conversation, the tools and how they may be called, the output format and the reasoning
// options. Field names in the pipeline's errors are OpenAI's; a front end with other names maps
// them where it parses.
#ifndef TEXTGEN_SERVER_PIPELINE_CHAT_TURN_H_
#define TEXTGEN_SERVER_PIPELINE_CHAT_TURN_H_

#include <optional>
#include <vector>

#include "engine/chat/tool_spec.h"
#include "nlohmann/json.hpp"
#include "server/pipeline/output_format.h"

namespace textgen::server {

enum class ReasoningFormat {
  kSeparate,  // a thinking model's reasoning is reported apart from the answer
  kRaw,       // everything the model writes is the answer's text (markup included)
};

struct ChatTurn {
  // OpenAI / Hugging Face shape, as the template takes them: [{"role", "content", "tool_calls"?,
  // "tool_call_id"?, "name"?, "reasoning_content"?}] (assistant tool_calls' arguments as
  // objects).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = true;
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice;  // kNone when there are no tools
  bool parallel_tool_calls = true;
  OutputFormat output;
  // Unset: the server's default (--reasoning-format).
  std::optional<ReasoningFormat> reasoning_format;
  // Most reasoning tokens (then the block is closed); unset: the server's default.
  std::optional<int> reasoning_budget;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_PIPELINE_CHAT_TURN_H_
