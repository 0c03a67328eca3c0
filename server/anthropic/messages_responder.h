// Serves one /v1/messages response from its CompletionRun (one engine request), on the httplib
// worker thread that holds the connection: streamed as Anthropic's server-sent events, or as
// one message object once the answer is complete.
//
// The stream: message_start (the message with empty content; usage.input_tokens is the
// prompt's length, the cache split is known only at the end), then per content block
// content_block_start, content_block_delta (text_delta, thinking_delta, input_json_delta),
// content_block_stop, then message_delta (stop_reason, stop_sequence, and the final usage:
// input_tokens not read from the prefix cache, cache_read_input_tokens, output_tokens) and
// message_stop. No pings (a response that waits for the engine writes nothing).
//
// As CompletionResponder: the client's connection is checked between waits (every 100 ms at
// most) and a client gone has its engine request cancelled. An engine failure after the
// response started is an `event: error` in a stream; a non-streamed response has committed to
// 200 by then, so its connection is closed without a body.
#ifndef TEXTGEN_SERVER_ANTHROPIC_MESSAGES_RESPONDER_H_
#define TEXTGEN_SERVER_ANTHROPIC_MESSAGES_RESPONDER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/anthropic/message_blocks.h"
#include "server/openai/completion_run.h"
#include "server/openai/run_registry.h"
#include "server/pipeline/answer_stream.h"
#include "server/server_metrics.h"

namespace httplib {
class DataSink;
}

namespace textgen::server::anthropic {

struct MessagesResponse {
  bool stream = false;
  std::string id;     // "msg_..."
  std::string model;  // as the response names it
  std::string route;  // for the metrics and the log
  std::vector<std::string> stop_sequences;
  int prompt_tokens = 0;  // message_start's input_tokens
  AnswerPlan answer;
};

class MessagesResponder {
 public:
  // `run` holds the one engine request of `response`. Registers it in `registry` until
  // destruction. Borrows `metrics` and `registry`.
  MessagesResponder(MessagesResponse response, std::unique_ptr<openai::CompletionRun> run,
                    ServerMetrics* metrics, openai::RunRegistry* registry);
  // Counts the request under its outcome and logs it; cancels what still runs.
  ~MessagesResponder();
  MessagesResponder(const MessagesResponder&) = delete;
  MessagesResponder& operator=(const MessagesResponder&) = delete;

  // httplib's chunked content provider: writes the whole body (blocking until the run ends).
  // False when the connection is to be dropped (client gone, or an error without a stream).
  bool Serve(httplib::DataSink& sink);

 private:
  void Handle(openai::CompletionRun::Event& event);
  // Feeds the answer's next text to the parser and the blocks.
  void Feed(std::string_view text);
  void Finish(const GenerationResult& result);
  void Fail(const absl::Status& status);
  void Emit(const std::vector<SseEvent>& events);
  void EmitOne(const std::string& name, const nlohmann::ordered_json& data);
  bool Flush(httplib::DataSink& sink);
  // The message object: message_start's (`start`: empty content, no stop) or the whole.
  nlohmann::ordered_json MessageJson(bool start) const;
  nlohmann::ordered_json UsageJson(bool start) const;

  const MessagesResponse response_;
  std::unique_ptr<openai::CompletionRun> run_;
  ServerMetrics* const metrics_;
  openai::RunRegistry* const registry_;
  const std::chrono::steady_clock::time_point start_;

  AnswerStream answer_;
  MessageBlocks blocks_;
  std::string text_;  // the engine's text so far
  std::string stop_reason_;
  std::string stop_sequence_;  // the one that matched, for stop_reason "stop_sequence"
  int input_tokens_ = 0;       // not read from the prefix cache
  int cached_tokens_ = 0;
  int output_tokens_ = 0;
  absl::Status error_;          // the first engine error
  std::string outcome_ = "OK";  // as counted in textgen_requests_total
  std::string pending_;         // SSE bytes not yet written
};

}  // namespace textgen::server::anthropic

#endif  // TEXTGEN_SERVER_ANTHROPIC_MESSAGES_RESPONDER_H_
