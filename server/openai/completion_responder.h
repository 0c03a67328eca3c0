// Serves one completion's HTTP body from its CompletionRun, on the httplib worker thread that
// holds the connection: streamed as server-sent events (`data: {chunk}` per delta, a chunk
// ending each choice, the usage chunk if asked, then `data: [DONE]`), or as one JSON object
// once every choice is complete.
//
// The client's connection is checked between waits (every 100 ms at most): a client that
// disconnects, or stops reading until a write times out, has its engine requests cancelled at
// once. An engine failure after the response started is an error event in the stream
// (`data: {"error": ...}`, no [DONE]); a non-streamed response has committed to 200 by then,
// so its connection is closed without a body instead (clients see a failed request, as with a
// cancelled gRPC call).
#ifndef TEXTGEN_SERVER_OPENAI_COMPLETION_RESPONDER_H_
#define TEXTGEN_SERVER_OPENAI_COMPLETION_RESPONDER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/openai/completion_json.h"
#include "server/openai/completion_request.h"
#include "server/openai/completion_run.h"
#include "server/openai/run_registry.h"
#include "server/server_metrics.h"

namespace httplib {
class DataSink;
}

namespace textgen::server::openai {

class CompletionResponder {
 public:
  // `run` must have been started from `request` (one engine request per choice, or one beam
  // search). `answer` says how to read each choice's text (content, reasoning, tool calls).
  // Registers the run in `registry` until destruction. Borrows `tokenizer`, `metrics` and
  // `registry`.
  CompletionResponder(CompletionRequest request, std::unique_ptr<CompletionRun> run, std::string id,
                      std::string model, const Tokenizer& tokenizer, std::string route,
                      ServerMetrics* metrics, RunRegistry* registry, const AnswerPlan& answer);
  // Counts the request in the metrics under its outcome and logs it; cancels what still runs.
  ~CompletionResponder();
  CompletionResponder(const CompletionResponder&) = delete;
  CompletionResponder& operator=(const CompletionResponder&) = delete;

  // httplib's chunked content provider: writes the whole body (blocking until the run ends).
  // False when the connection is to be dropped (client gone, or an error without a stream).
  bool Serve(httplib::DataSink& sink);

 private:
  void Handle(CompletionRun::Event& event);
  void HandleResult(int request, const GenerationResult& result);
  // Completes choice `index` to `text` (whose prefix it has streamed) and `tokens`; streams
  // the rest and the choice's end.
  void FinishChoice(int index, const std::string& text, std::vector<GeneratedToken> tokens,
                    FinishReason reason);
  // Streams choice `index`'s new text and the tokens behind it.
  void StreamText(int index, std::string_view text, absl::Span<const GeneratedToken> tokens);
  void Fail(const absl::Status& status);
  void Emit(const nlohmann::ordered_json& chunk);
  bool Flush(httplib::DataSink& sink);

  const CompletionRequest request_;
  std::unique_ptr<CompletionRun> run_;
  const CompletionJson json_;
  const std::string id_;
  const std::string route_;
  ServerMetrics* const metrics_;
  RunRegistry* const registry_;
  const Tokenizer& tokenizer_;
  const std::chrono::steady_clock::time_point start_;

  std::vector<ChoiceText> choices_;
  CompletionUsage usage_;
  bool prompt_counted_ = false;
  absl::Status error_;          // the first engine error
  std::string outcome_ = "OK";  // as counted in textgen_requests_total
  std::string pending_;         // SSE bytes not yet written
};

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_COMPLETION_RESPONDER_H_
