#include "server/openai/completion_run.h"

#include <chrono>
#include <deque>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace textgen::server::openai {

struct CompletionRun::Queue {
  absl::Mutex mu;
  std::deque<Event> events ABSL_GUARDED_BY(mu);
  int pending ABSL_GUARDED_BY(mu) = 0;  // submitted requests without their last event yet
  // Delivered last events; all of them once pending is 0.
  std::vector<bool> finished ABSL_GUARDED_BY(mu);
};

// One engine request's sink: queues its deltas and result, and feeds the latency metrics as
// the gRPC stream does (time to first token from the HTTP request's arrival).
class CompletionRun::Sink final : public GenerationSink {
 public:
  Sink(std::shared_ptr<Queue> queue, int index, ServerMetrics* metrics,
       std::chrono::steady_clock::time_point start)
      : queue_(std::move(queue)), index_(index), metrics_(metrics), start_(start) {}

  void OnDelta(const StreamDelta& delta) override {
    if (delta.tokens.empty() && delta.text.empty()) return;
    ObserveLatency(delta.tokens.size());
    absl::MutexLock lock(&queue_->mu);
    queue_->events.push_back(Event{index_, delta, std::nullopt});
  }

  void OnDone(absl::StatusOr<GenerationResult> result) override {
    if (result.ok()) {
      metrics_->CountGeneration(result->stats);
    }
    absl::MutexLock lock(&queue_->mu);
    queue_->events.push_back(Event{index_, {}, std::move(result)});
    queue_->finished[index_] = true;
    --queue_->pending;
  }

 private:
  void ObserveLatency(size_t tokens) {
    if (tokens == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last_token_.has_value()) {
      metrics_->ObserveTimeToFirstToken(std::chrono::duration<double>(now - start_).count());
    } else {
      const double gap =
          std::chrono::duration<double>(now - *last_token_).count() / static_cast<double>(tokens);
      for (size_t i = 0; i < tokens; ++i) metrics_->ObserveInterTokenLatency(gap);
    }
    last_token_ = now;
  }

  std::shared_ptr<Queue> queue_;
  const int index_;
  ServerMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::optional<std::chrono::steady_clock::time_point> last_token_;  // scheduler thread only
};

absl::StatusOr<std::unique_ptr<CompletionRun>> CompletionRun::Start(
    Engine* engine, std::vector<EngineRequest> requests, ServerMetrics* metrics) {
  const auto start = std::chrono::steady_clock::now();
  auto queue = std::make_shared<Queue>();
  {
    absl::MutexLock lock(&queue->mu);
    queue->finished.assign(requests.size(), false);
  }
  std::unique_ptr<CompletionRun> run(new CompletionRun(engine, queue));
  for (size_t i = 0; i < requests.size(); ++i) {
    {
      absl::MutexLock lock(&queue->mu);
      ++queue->pending;
    }
    absl::StatusOr<uint64_t> id = engine->Submit(
        std::move(requests[i]), std::make_shared<Sink>(queue, static_cast<int>(i), metrics, start));
    if (!id.ok()) {
      {
        absl::MutexLock lock(&queue->mu);
        --queue->pending;
      }
      run->Cancel();  // the destructor would, too; the caller reports the status
      return id.status();
    }
    run->ids_.push_back(*id);
  }
  return run;
}

CompletionRun::~CompletionRun() { Cancel(); }

void CompletionRun::Cancel() {
  std::vector<uint64_t> unfinished;
  {
    absl::MutexLock lock(&queue_->mu);
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (!queue_->finished[i]) unfinished.push_back(ids_[i]);
    }
  }
  // Unknown or finished ids are ignored by the engine, so a race with OnDone is harmless.
  for (uint64_t id : unfinished) engine_->Cancel(id);
}

bool CompletionRun::Take(absl::Duration timeout, std::vector<Event>* out) {
  absl::MutexLock lock(&queue_->mu);
  auto ready = [q = queue_.get()]() { return !q->events.empty() || q->pending == 0; };
  queue_->mu.AwaitWithTimeout(absl::Condition(&ready), timeout);
  for (Event& e : queue_->events) out->push_back(std::move(e));
  queue_->events.clear();
  return queue_->pending == 0;
}

bool CompletionRun::Drive(absl::Duration poll, const std::function<bool()>& deliver,
                          const std::function<void(Event&)>& handle) {
  std::vector<Event> events;
  bool done = false;
  while (!done) {
    if (!deliver()) {
      // Gone (closed, reset, or not reading until the write timed out): stop the work.
      Cancel();
      return false;
    }
    events.clear();
    done = Take(poll, &events);
    for (Event& e : events) handle(e);
  }
  return true;
}

}  // namespace textgen::server::openai
