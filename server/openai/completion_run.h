// The engine requests behind one HTTP completion (one per choice, or one beam search) with
// their streams merged into one event queue. The engine's sinks only queue (they run on the
// scheduler thread and must not block); the HTTP worker serving the request takes the events.
//
// Lifetime: the run is owned by the HTTP response; the sinks share only the queue. Destroying
// the run cancels every engine request that has not finished (client gone, connection error).
#ifndef TEXTGEN_SERVER_OPENAI_COMPLETION_RUN_H_
#define TEXTGEN_SERVER_OPENAI_COMPLETION_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/scheduler/engine.h"
#include "server/server_metrics.h"

namespace textgen::server::openai {

class CompletionRun {
 public:
  struct Event {
    int request = 0;  // index into the requests given to Start
    StreamDelta delta;
    // Set on the request's last event (its OnDone); the delta is then empty.
    std::optional<absl::StatusOr<GenerationResult>> done;
  };

  // Submits the requests in order. If one is refused, those already submitted are cancelled
  // and its status is returned (InvalidArgument, ResourceExhausted, ...). `metrics` (borrowed)
  // gets every request's latencies and token counts.
  static absl::StatusOr<std::unique_ptr<CompletionRun>> Start(Engine* engine,
                                                              std::vector<EngineRequest> requests,
                                                              ServerMetrics* metrics);
  // Cancel().
  ~CompletionRun();
  CompletionRun(const CompletionRun&) = delete;
  CompletionRun& operator=(const CompletionRun&) = delete;

  // Moves the queued events to `out` (in arrival order), waiting up to `timeout` for one if
  // there are none. Returns whether every request has delivered its last event.
  bool Take(absl::Duration timeout, std::vector<Event>* out);
  // Cancels every engine request that has not finished (they end at the next step, freeing
  // their KV blocks). Thread-safe, idempotent.
  void Cancel();
  // An HTTP worker's loop over the run, shared by the front ends: until every request has
  // delivered its last event, `deliver` writes what is pending (false: the client is gone,
  // then the run is cancelled and Drive returns false) and each event taken (waiting up to
  // `poll` for one) goes to `handle`. True once every request is done; what `handle` queued
  // after the last deliver is the caller's to write.
  bool Drive(absl::Duration poll, const std::function<bool()>& deliver,
             const std::function<void(Event&)>& handle);

 private:
  struct Queue;
  class Sink;

  CompletionRun(Engine* engine, std::shared_ptr<Queue> queue)
      : engine_(engine), queue_(std::move(queue)) {}

  Engine* const engine_;
  std::shared_ptr<Queue> queue_;
  std::vector<uint64_t> ids_;
};

}  // namespace textgen::server::openai

#endif  // TEXTGEN_SERVER_OPENAI_COMPLETION_RUN_H_
