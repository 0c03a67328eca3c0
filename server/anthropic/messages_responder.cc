#include "server/anthropic/messages_responder.h"

#include <httplib.h>

#include <utility>

#include "engine/decoding/stop_matcher.h"
#include "server/anthropic/anthropic_error.h"
#include "server/error_table.h"
#include "server/openai/completion_json.h"
#include "spdlog/spdlog.h"

namespace textgen::server::anthropic {
namespace {

using json = nlohmann::ordered_json;

// How long a wait for the engine lasts before the connection is checked again.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

std::string StopReason(FinishReason reason, bool made_tool_calls) {
  switch (AnswerEndOf(reason, made_tool_calls)) {
    case AnswerEnd::kLength:
      return "max_tokens";
    case AnswerEnd::kToolCalls:
      return "tool_use";
    case AnswerEnd::kStop:
    case AnswerEnd::kCancelled:  // never reported: a cancelled run is an error
      break;
  }
  return reason == FinishReason::kStopSequence ? "stop_sequence" : "end_turn";
}

// The stop sequence that ended `result`: the engine cuts the text before it without saying
// which; the generated tokens' text, matched again as the engine matched it, tells.
std::string MatchedStop(const GenerationResult& result, const std::vector<std::string>& stops) {
  StopMatcher matcher(stops);
  for (const GeneratedToken& t : result.tokens) {
    matcher.Push(t.text);
    if (matcher.stopped()) break;
  }
  return matcher.matched();
}

}  // namespace

MessagesResponder::MessagesResponder(MessagesResponse response,
                                     std::unique_ptr<openai::CompletionRun> run,
                                     ServerMetrics* metrics, openai::RunRegistry* registry)
    : response_(std::move(response)),
      run_(std::move(run)),
      metrics_(metrics),
      registry_(registry),
      start_(std::chrono::steady_clock::now()),
      answer_(response_.answer) {
  registry_->Add(run_.get());
}

MessagesResponder::~MessagesResponder() {
  registry_->Remove(run_.get());
  run_->Cancel();
  metrics_->CountRequest(response_.route, outcome_);
  spdlog::info(
      "http {} id={} stream={} input_tokens={} cached_tokens={} output_tokens={} ms={:.1f} "
      "stop={} status={}{}{}",
      response_.route, response_.id, response_.stream, input_tokens_, cached_tokens_,
      output_tokens_,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count(),
      stop_reason_.empty() ? "none" : stop_reason_, outcome_, error_.ok() ? "" : " ",
      std::string(error_.message()));
}

json MessagesResponder::UsageJson(bool start) const {
  return {{"input_tokens", start ? response_.prompt_tokens : input_tokens_},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", start ? 0 : cached_tokens_},
          {"output_tokens", start ? 0 : output_tokens_}};
}

json MessagesResponder::MessageJson(bool start) const {
  json m = {{"id", response_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", response_.model},
            {"content", start ? json::array() : blocks_.Content()},
            {"stop_reason", nullptr},
            {"stop_sequence", nullptr}};
  if (!start) {
    m["stop_reason"] = stop_reason_;
    if (!stop_sequence_.empty()) m["stop_sequence"] = stop_sequence_;
  }
  m["usage"] = UsageJson(start);
  return m;
}

void MessagesResponder::EmitOne(const std::string& name, const json& data) {
  if (!response_.stream) return;
  pending_ += "event: ";
  pending_ += name;
  pending_ += "\ndata: ";
  pending_ += openai::DumpJson(data);
  pending_ += "\n\n";
}

void MessagesResponder::Emit(const std::vector<SseEvent>& events) {
  for (const SseEvent& e : events) EmitOne(e.name, e.data);
}

bool MessagesResponder::Flush(httplib::DataSink& sink) {
  if (pending_.empty()) return true;
  const bool ok = sink.write(pending_.data(), pending_.size());
  pending_.clear();
  return ok;
}

bool MessagesResponder::Serve(httplib::DataSink& sink) {
  EmitOne("message_start", json{{"type", "message_start"}, {"message", MessageJson(true)}});
  if (!run_->Drive(
          kPollInterval, [&] { return Flush(sink) && sink.is_writable(); },
          [&](openai::CompletionRun::Event& e) { Handle(e); })) {
    outcome_ = "CANCELLED";
    return false;
  }
  if (!error_.ok()) {
    outcome_ = MetricsCode(error_);
    if (!response_.stream) return false;
    pending_ += "event: error\ndata: " + ErrorBody(error_) + "\n\n";
  } else if (response_.stream) {
    json delta = {{"stop_reason", stop_reason_}, {"stop_sequence", nullptr}};
    if (!stop_sequence_.empty()) delta["stop_sequence"] = stop_sequence_;
    EmitOne("message_delta",
            json{{"type", "message_delta"}, {"delta", delta}, {"usage", UsageJson(false)}});
    EmitOne("message_stop", json{{"type", "message_stop"}});
  } else {
    pending_ = openai::DumpJson(MessageJson(false));
  }
  if (!Flush(sink)) {
    outcome_ = "CANCELLED";
    return false;
  }
  sink.done();
  return true;
}

void MessagesResponder::Handle(openai::CompletionRun::Event& event) {
  if (!error_.ok()) return;  // failed: the rest is cancelled and not shown
  if (!event.done.has_value()) {
    Feed(event.delta.text);
    return;
  }
  absl::StatusOr<GenerationResult>& result = *event.done;
  if (!result.ok()) {
    Fail(result.status());
  } else if (result->finish_reason == FinishReason::kCancelled) {
    // Not the client (it is still here): the server is shutting down.
    Fail(absl::UnavailableError("the request was cancelled: the server is shutting down"));
  } else {
    Finish(*result);
  }
}

void MessagesResponder::Feed(std::string_view text) {
  if (text.empty()) return;
  text_ += text;
  std::vector<AssistantOutputEvent> pieces;
  answer_.Feed(text, &pieces);
  std::vector<SseEvent> events;
  for (const AssistantOutputEvent& p : pieces) blocks_.Add(p, &events);
  Emit(events);
}

void MessagesResponder::Finish(const GenerationResult& result) {
  // The stream carried a prefix of the final text (all of it for greedy and sampling).
  const std::string text = result.hypotheses.empty() ? "" : result.hypotheses[0].text;
  if (text.starts_with(text_) && text.size() > text_.size()) Feed(text.substr(text_.size()));
  std::vector<AssistantOutputEvent> pieces;
  answer_.Finish(&pieces);
  std::vector<SseEvent> events;
  for (const AssistantOutputEvent& p : pieces) blocks_.Add(p, &events);
  blocks_.Close(&events);
  Emit(events);
  stop_reason_ = StopReason(result.finish_reason, answer_.made_tool_calls());
  if (stop_reason_ == "stop_sequence") {
    stop_sequence_ = MatchedStop(result, response_.stop_sequences);
  }
  cached_tokens_ = result.stats.cached_tokens;
  input_tokens_ = result.stats.prompt_tokens - result.stats.cached_tokens;
  output_tokens_ = result.stats.generated_tokens;
}

void MessagesResponder::Fail(const absl::Status& status) {
  error_ = status;
  run_->Cancel();
}

}  // namespace textgen::server::anthropic
