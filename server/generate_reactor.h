// One Generate stream: adapts the engine's GenerationSink (called on the scheduler thread,
// which must never block) to a gRPC server-streaming reactor with at most one write in flight.
//
// Deltas are queued under a mutex (merged into one pending message while a write is in
// flight, so a slow client costs one growing message, not a backlog of them); OnWriteDone
// starts the next write; once the engine's result is queued and written, Finish(OK). If the
// client goes away (cancel, deadline, disconnect, failed write) the engine request is
// cancelled and the stream finishes at once without writing.
//
// Lifetime: two parties hold the reactor through shared_ptrs: gRPC (dropped in OnDone) and the
// engine's sink (dropped when the engine releases the sink after its OnDone). Whichever
// finishes last frees it, so the engine can free it only after gRPC's OnDone, as gRPC requires.
#ifndef TEXTGEN_SERVER_GENERATE_REACTOR_H_
#define TEXTGEN_SERVER_GENERATE_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "engine/scheduler/engine.h"
#include "server/chat_prompter.h"
#include "server/happens_before.h"
#include "server/pipeline/answer_stream.h"
#include "server/prompt_workers.h"
#include "server/request_convert.h"
#include "server/server_metrics.h"
#include "server/shutdown_clock.h"
#include "textgen/v1/textgen.pb.h"

namespace textgen::server {

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                              public std::enable_shared_from_this<GenerateReactor> {
 public:
  // Makes the engine request with `build` (Generate's conversion, Chat's rendering) and submits
  // it (the engine tokenizes a text prompt in Submit); on any error, the conversion's included,
  // the stream finishes with that status. With `workers` (a big prompt) both run there, and
  // the stream finishes with RESOURCE_EXHAUSTED if their queue is full; without, at once on
  // this thread. `build` must own what it reads (the call's request may be gone by the time a
  // worker runs it). The returned pointer is handed to gRPC, which owns it until OnDone. `rpc`
  // ("Generate", "Chat") names the stream in the metrics and logs. `metrics` (borrowed,
  // outlives the stream) gets the stream's final status, its token counts and latencies.
  // `shutdown` (borrowed, outlives the stream) tells a cancel by the server's shutdown (logged
  // and counted as UNAVAILABLE, what the client sees) from its client's (CANCELLED).
  static GenerateReactor* Start(Engine* engine,
                                std::function<absl::StatusOr<PreparedGeneration>()> build,
                                PromptWorkers* workers, const char* rpc, ServerMetrics* metrics,
                                const ShutdownClock* shutdown,
                                grpc::CallbackServerContext* context);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;

  GenerateReactor(Engine* engine, const char* rpc, ServerMetrics* metrics,
                  const ShutdownClock* shutdown, grpc::CallbackServerContext* context);
  // Why the stream ended without the engine's answer: the deadline, the shutdown or the client.
  grpc::Status GoneStatus() const;

  // Submits the built request (or finishes with its error).
  void Submit(absl::StatusOr<PreparedGeneration> prepared);

  // Scheduler thread (through Sink).
  void HandleDelta(const StreamDelta& delta);
  void HandleResult(absl::StatusOr<GenerationResult> result);
  // Completes the final message's answer: the rest of the text through the answer reader, and
  // the hypotheses' parsed content, reasoning and tool calls.
  void FinishAnswer(const GenerationResult& result, v1::GenerateResponse* last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Starts the next write, or finishes the stream, if nothing is in flight and there is
  // something to do. Called without mu_ held; the decision is taken under it, the gRPC call
  // made after it (a reaction may run on another thread before StartWrite returns).
  void Pump();
  // Client gone: stop the engine request (it frees its KV blocks at the next step).
  void CancelEngineRequest();
  void LogCompletion(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Engine* const engine_;
  const char* const rpc_;
  ServerMetrics* const metrics_;
  const ShutdownClock* const shutdown_;
  const Tokenizer& tokenizer_;
  const std::chrono::steady_clock::time_point start_;
  // To tell a deadline from a client's cancel (both reach us as OnCancel).
  const std::chrono::system_clock::time_point deadline_;

  // gRPC's reference; reset in OnDone.
  std::shared_ptr<GenerateReactor> self_;
  // gRPC runs OnDone after every other reaction has returned, but orders an OnCancel before it
  // only inside libgrpc++ (uninstrumented): without this edge ThreadSanitizer sees OnCancel's
  // Finish unordered with the reactor's destruction after OnDone (see happens_before.h).
  HappensBefore reactions_before_done_;

  absl::Mutex mu_;
  // For the completion log line ("-" when the request did not convert).
  std::string session_id_ ABSL_GUARDED_BY(mu_) = "-";
  std::string method_ ABSL_GUARDED_BY(mu_) = "-";
  std::optional<uint64_t> engine_id_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::GenerateResponse> queue_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  // What the stream carried so far (to complete a beam answer in the final message): tokens,
  // and the engine's text before it was read as an answer.
  size_t streamed_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::string streamed_text_ ABSL_GUARDED_BY(mu_);
  // Reads the engine's text as content, reasoning and tool calls (Chat), or passes it through.
  AnswerPlan answer_plan_ ABSL_GUARDED_BY(mu_);
  AnswerStream answer_ ABSL_GUARDED_BY(mu_);
  // Summary for the log line.
  int prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int generated_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int cached_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::string finish_reason_ ABSL_GUARDED_BY(mu_) = "none";
  // When the last token was streamed (for the latency histograms).
  std::optional<std::chrono::steady_clock::time_point> last_token_time_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by whoever set write_in_flight_.
  v1::GenerateResponse current_;
};

}  // namespace textgen::server

#endif  // TEXTGEN_SERVER_GENERATE_REACTOR_H_
