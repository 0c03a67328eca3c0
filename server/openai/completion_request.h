// The JSON body of POST /v1/chat/completions and /v1/completions -> what the engine runs.
//
// Every field is either applied or refused: unknown fields and fields this server does not
// implement (logit_bias, audio, ...) are FieldErrors naming them, except when they hold their
// no-op value (null, presence_penalty 0, logit_bias {}, ...). Applied besides decoding: tools,
// tool_choice, parallel_tool_calls, response_format (text, json_object, json_schema, and the
// extensions regex, choice, grammar; llama.cpp's top-level grammar / json_schema and vLLM's
// guided_json / guided_regex / guided_choice / guided_grammar are the same), reasoning_format
// and reasoning_budget (extensions). Decoding follows
// OpenAI: temperature (default 1) 0 is greedy, above 0 samples with top_p / seed; vLLM's
// extension fields select beam search (use_beam_search, best_of = beams, length_penalty,
// early_stopping) and add top_k, min_p, repetition_penalty and ignore_eos. A field that would
// have no effect under the chosen method (top_p < 1 with temperature 0, temperature > 0 with
// beams, length_penalty without beams, ...) is refused, not ignored.
#ifndef TEXTGEN_SERVER_OPENAI_COMPLETION_REQUEST_H_
#define TEXTGEN_SERVER_OPENAI_COMPLETION_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/decoding/decoding_options.h"
#include "nlohmann/json.hpp"
#include "server/pipeline/chat_turn.h"
#include "server/pipeline/output_format.h"
#include "server/request_convert.h"

namespace textgen::server::openai {

enum class Endpoint { kChat, kCompletions };

// Most choices (n) one request may ask for.
inline constexpr int kMaxChoices = 8;

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // empty: not given
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage

  // /v1/chat/completions: messages as the template takes them (content parts joined into one
  // string), add_generation_prompt (vLLM; default true), chat_template_kwargs (vLLM), tools,
  // tool_choice, parallel_tool_calls, reasoning options. Its `output` is unused: see below.
  ChatTurn chat;
  // Both endpoints: what the output must be (response_format and its equivalents).
  OutputFormat output;

  // /v1/completions: one prompt, as text or as token ids.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;

  int n = 1;              // choices
  bool logprobs = false;  // report the chosen tokens' logprobs
  int top_logprobs = 0;   // and this many alternatives per token
  // The name the client used for the length limit, for the engine's messages about it.
  std::string max_tokens_field = "max_tokens";
  // Complete per choice, except the seed: choice i of a seeded sampling request uses seed + i.
  DecodingOptions decoding;
  // Predicted Outputs' text, tokenized into decoding.speculation.prediction once the tokenizer
  // is at hand.
  std::string prediction_text;

  bool beam() const { return decoding.method == DecodingMethod::kBeam; }
  // Engine requests to run: one per choice, or one beam search whose hypotheses are the
  // choices.
  int engine_requests() const { return beam() ? 1 : n; }
};

// Parses and checks `body`; FieldError (400) naming the field for anything refused.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(Endpoint endpoint, std::string_view body,
                                                         const RequestLimits& limits);

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_COMPLETION_REQUEST_H_
