#include "server/generate_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/error_table.h"
#include "server/log_safe.h"
#include "server/response_convert.h"
#include "spdlog/spdlog.h"

namespace textgen::server {
namespace {

// Deltas merged into one pending message at most; keeps each message far below gRPC's default
// 4 MB receive limit however far a slow client falls behind.
constexpr int kMaxMergedTokens = 4096;

const char* MethodName(DecodingMethod m) {
  switch (m) {
    case DecodingMethod::kGreedy:
      return "greedy";
    case DecodingMethod::kSample:
      return "sample";
    case DecodingMethod::kBeam:
      return "beam";
  }
  return "?";
}

}  // namespace

// What the engine holds: forwards to the reactor and keeps it alive until the engine lets go.
class GenerateReactor::Sink final : public GenerationSink {
 public:
  explicit Sink(std::shared_ptr<GenerateReactor> reactor) : reactor_(std::move(reactor)) {}
  void OnDelta(const StreamDelta& delta) override { reactor_->HandleDelta(delta); }
  void OnDone(absl::StatusOr<GenerationResult> result) override {
    reactor_->HandleResult(std::move(result));
  }

 private:
  std::shared_ptr<GenerateReactor> reactor_;
};

GenerateReactor::GenerateReactor(Engine* engine, const char* rpc, ServerMetrics* metrics,
                                 const ShutdownClock* shutdown,
                                 grpc::CallbackServerContext* context)
    : engine_(engine),
      rpc_(rpc),
      metrics_(metrics),
      shutdown_(shutdown),
      tokenizer_(engine->model().tokenizer()),
      start_(std::chrono::steady_clock::now()),
      deadline_(context->deadline()) {}

GenerateReactor* GenerateReactor::Start(Engine* engine,
                                        std::function<absl::StatusOr<PreparedGeneration>()> build,
                                        PromptWorkers* workers, const char* rpc,
                                        ServerMetrics* metrics, const ShutdownClock* shutdown,
                                        grpc::CallbackServerContext* context) {
  std::shared_ptr<GenerateReactor> reactor(
      new GenerateReactor(engine, rpc, metrics, shutdown, context));
  reactor->self_ = reactor;
  if (workers == nullptr) {
    reactor->Submit(build());
  } else if (!workers->TryPost([reactor, build = std::move(build)] { reactor->Submit(build()); })) {
    reactor->Submit(absl::ResourceExhaustedError(
        absl::StrCat("too many long prompts are being prepared (", workers->max_pending(),
                     " waiting); retry later")));
  }
  return reactor.get();
}

void GenerateReactor::Submit(absl::StatusOr<PreparedGeneration> prepared) {
  if (prepared.ok()) {
    absl::MutexLock lock(&mu_);
    session_id_ = LoggedSessionId(prepared->request.session_id);
    method_ = MethodName(prepared->request.decoding.method);
    answer_plan_ = prepared->answer;
    answer_ = AnswerStream(answer_plan_);
  }
  // The reactor outlives this call: the sink holds it, and so does the caller.
  absl::StatusOr<uint64_t> id = prepared.ok()
                                    ? engine_->Submit(std::move(prepared->request),
                                                      std::make_shared<Sink>(shared_from_this()))
                                    : absl::StatusOr<uint64_t>(prepared.status());
  bool cancel_now = false;
  {
    absl::MutexLock lock(&mu_);
    if (id.ok()) {
      engine_id_ = *id;
      // OnCancel may already have run, before the id was known.
      cancel_now = client_gone_;
    } else {
      // The engine never saw the request: no OnDone will come from it.
      engine_done_ = true;
      final_status_ = ToGrpcStatus(id.status());
    }
  }
  if (cancel_now) engine_->Cancel(*id);
  Pump();
}

void GenerateReactor::HandleDelta(const StreamDelta& delta) {
  if (delta.tokens.empty() && delta.text.empty()) return;
  v1::GenerateResponse msg;
  for (const GeneratedToken& t : delta.tokens) AppendToken(t, tokenizer_, msg.add_tokens());
  {
    absl::MutexLock lock(&mu_);
    if (client_gone_ || finish_called_) return;
    std::vector<AssistantOutputEvent> events;
    answer_.Feed(delta.text, &events);
    AppendAnswerEvents(events, &msg);
    if (!delta.tokens.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (!last_token_time_.has_value()) {
        metrics_->ObserveTimeToFirstToken(std::chrono::duration<double>(now - start_).count());
      } else {
        // A message of n tokens (held back by a stop string, or merged) spreads its wait.
        const double gap = std::chrono::duration<double>(now - *last_token_time_).count() /
                           static_cast<double>(delta.tokens.size());
        for (size_t i = 0; i < delta.tokens.size(); ++i) metrics_->ObserveInterTokenLatency(gap);
      }
      last_token_time_ = now;
    }
    streamed_tokens_ += delta.tokens.size();
    streamed_text_ += ValidUtf8(delta.text);
    if (write_in_flight_ && !queue_.empty() && queue_.back().tokens_size() < kMaxMergedTokens) {
      // Still waiting behind a write: one merged message instead of a backlog.
      v1::GenerateResponse& back = queue_.back();
      back.mutable_tokens()->MergeFrom(msg.tokens());
      back.mutable_text()->append(msg.text());
      back.mutable_reasoning_text()->append(msg.reasoning_text());
      back.mutable_tool_calls()->MergeFrom(msg.tool_calls());
      return;
    }
    queue_.push_back(std::move(msg));
  }
  Pump();
}

void GenerateReactor::HandleResult(absl::StatusOr<GenerationResult> result) {
  // The engine's work counts whether or not the client stayed to see it.
  if (result.ok()) {
    metrics_->CountGeneration(result->stats);
  }
  {
    absl::MutexLock lock(&mu_);
    engine_done_ = true;
    if (client_gone_ || finish_called_) return;
    v1::GenerateResponse last;
    if (result.ok()) {
      FillFinalResponse(*result, tokenizer_, streamed_tokens_, streamed_text_, &last);
      FinishAnswer(*result, &last);
      prompt_tokens_ = result->stats.prompt_tokens;
      generated_tokens_ = result->stats.generated_tokens;
      cached_tokens_ = result->stats.cached_tokens;
      finish_reason_ = std::string(FinishReasonName(result->finish_reason));
    } else if (absl::IsCancelled(result.status())) {
      // Cancelled before it started (e.g. the engine shut down) while the client is still
      // there: an ordinary end of stream saying so.
      last.set_finish_reason(v1::CANCELLED);
      last.mutable_usage();
      finish_reason_ = "cancelled";
    } else {
      final_status_ = ToGrpcStatus(result.status());
      finish_reason_ = "error";
    }
    if (result.ok() || absl::IsCancelled(result.status())) {
      queue_.push_back(std::move(last));
    }
  }
  Pump();
}

void GenerateReactor::FinishAnswer(const GenerationResult& result, v1::GenerateResponse* last) {
  // The rest of the best answer's text (FillFinalResponse put it in last->text), read as the
  // stream was, then what the reader held back.
  std::vector<AssistantOutputEvent> events;
  const std::string rest = std::move(*last->mutable_text());
  last->clear_text();
  answer_.Feed(rest, &events);
  answer_.Finish(&events);
  AppendAnswerEvents(events, last);
  if (!answer_plan_.parse || last->hypotheses_size() == 0) return;
  SetParsedAnswer(answer_.message(), answer_.made_tool_calls(), last->mutable_hypotheses(0));
  if (last->hypotheses(0).finish_reason() == v1::TOOL_CALLS)
    last->set_finish_reason(v1::TOOL_CALLS);
  // The other hypotheses (beam search's num_return_sequences) were never streamed.
  for (int i = 1; i < last->hypotheses_size() && i < static_cast<int>(result.hypotheses.size());
       ++i) {
    const AssistantMessage m =
        AssistantOutputParser::ParseWhole(answer_plan_.options, result.hypotheses[i].text);
    bool calls = false;
    for (const ParsedToolCall& c : m.tool_calls) calls = calls || c.complete;
    SetParsedAnswer(m, calls, last->mutable_hypotheses(i));
  }
}

void GenerateReactor::Pump() {
  enum class Action { kNone, kWrite, kFinish } action = Action::kNone;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (finish_called_ || write_in_flight_) return;
    if (!client_gone_ && !queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      write_in_flight_ = true;
      action = Action::kWrite;
    } else if (client_gone_ || engine_done_) {
      finish_called_ = true;
      status = client_gone_ ? GoneStatus() : final_status_;
      metrics_->CountRequest(rpc_, GrpcCodeName(status.error_code()));
      if (client_gone_ && finish_reason_ == "none") {
        finish_reason_ = status.error_code() == grpc::StatusCode::UNAVAILABLE ? "server_shutdown"
                                                                              : "client_gone";
      }
      LogCompletion(status);
      action = Action::kFinish;
    }
  }
  if (action == Action::kWrite) {
    StartWrite(&current_);
  } else if (action == Action::kFinish) {
    Finish(status);
  }
}

grpc::Status GenerateReactor::GoneStatus() const {
  const auto now = std::chrono::system_clock::now();
  if (shutdown_->IsShutdownCancel(now)) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is shutting down (cancelled at the end of its grace period)");
  }
  // gRPC's timer and this clock disagree by a few ms (the deadline travels as a timeout), so a
  // cancel in the last 100 ms before the deadline counts as the deadline.
  if (now + std::chrono::milliseconds(100) >= deadline_) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
}

void GenerateReactor::OnWriteDone(bool ok) {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok && !client_gone_) {
      // The stream is broken (client disconnected): nothing more can be delivered.
      client_gone_ = true;
      queue_.clear();
      cancel = !engine_done_;
    }
  }
  if (cancel) CancelEngineRequest();
  Pump();
  reactions_before_done_.Release();
}

void GenerateReactor::OnCancel() {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (!client_gone_) {
      client_gone_ = true;
      queue_.clear();
      cancel = !engine_done_;
    }
  }
  if (cancel) CancelEngineRequest();
  Pump();
  // Still alive: gRPC holds the call (and so OnDone) until this reaction returns.
  reactions_before_done_.Release();
}

void GenerateReactor::CancelEngineRequest() {
  std::optional<uint64_t> id;
  {
    absl::MutexLock lock(&mu_);
    id = engine_id_;
  }
  // Without an id Start has not finished submitting; it sees client_gone_ and cancels.
  if (id.has_value()) engine_->Cancel(*id);
}

void GenerateReactor::OnDone() {
  reactions_before_done_.Acquire();
  // gRPC is done with the reactor; the engine's sink may still hold it.
  std::shared_ptr<GenerateReactor> self = std::move(self_);
}

void GenerateReactor::LogCompletion(const grpc::Status& status) {
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  spdlog::info(
      "{} id={} session={} method={} prompt_tokens={} cached_tokens={} "
      "generated_tokens={} ms={:.1f} finish={} status={}{}{}",
      rpc_, engine_id_.has_value() ? std::to_string(*engine_id_) : "-", session_id_, method_,
      prompt_tokens_, cached_tokens_,
      // Without a result (client gone first) what was streamed is all that is known.
      engine_done_ ? generated_tokens_ : static_cast<int>(streamed_tokens_), ms, finish_reason_,
      GrpcCodeName(status.error_code()), status.ok() ? "" : " ", LogSafe(status.error_message()));
}

}  // namespace textgen::server
