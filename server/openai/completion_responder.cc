#include "server/openai/completion_responder.h"

#include <httplib.h>

#include <ctime>
#include <utility>

#include "server/openai/api_error.h"
#include "spdlog/spdlog.h"

namespace textgen::server::openai {
namespace {

// How long a wait for the engine lasts before the connection is checked again.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

}  // namespace

CompletionResponder::CompletionResponder(CompletionRequest request,
                                         std::unique_ptr<CompletionRun> run, std::string id,
                                         std::string model, const Tokenizer& tokenizer,
                                         std::string route, ServerMetrics* metrics,
                                         RunRegistry* registry, const AnswerPlan& answer)
    : request_(std::move(request)),
      run_(std::move(run)),
      json_(request_, id, static_cast<int64_t>(std::time(nullptr)), std::move(model), tokenizer),
      id_(std::move(id)),
      route_(std::move(route)),
      metrics_(metrics),
      registry_(registry),
      tokenizer_(tokenizer),
      start_(std::chrono::steady_clock::now()),
      choices_(static_cast<size_t>(request_.n)) {
  for (ChoiceText& c : choices_) c.answer = AnswerStream(answer);
  registry_->Add(run_.get());
}

CompletionResponder::~CompletionResponder() {
  registry_->Remove(run_.get());
  run_->Cancel();
  metrics_->CountRequest(route_, outcome_);
  std::string finish;
  for (const ChoiceText& c : choices_) {
    if (!finish.empty()) finish += ",";
    finish += c.end.has_value() ? std::string(OpenAiFinishReason(*c.end)) : "none";
  }
  spdlog::info(
      "http {} id={} choices={} stream={} prompt_tokens={} cached_tokens={} "
      "completion_tokens={} ms={:.1f} finish={} status={}{}{}",
      route_, id_, request_.n, request_.stream, usage_.prompt_tokens, usage_.cached_tokens,
      usage_.completion_tokens,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count(),
      finish, outcome_, error_.ok() ? "" : " ", std::string(error_.message()));
}

void CompletionResponder::Emit(const nlohmann::ordered_json& chunk) {
  if (!request_.stream) return;
  pending_ += "data: ";
  pending_ += DumpJson(chunk);
  pending_ += "\n\n";
}

bool CompletionResponder::Flush(httplib::DataSink& sink) {
  if (pending_.empty()) return true;
  const bool ok = sink.write(pending_.data(), pending_.size());
  pending_.clear();
  return ok;
}

bool CompletionResponder::Serve(httplib::DataSink& sink) {
  if (request_.endpoint == Endpoint::kChat) {
    for (int i = 0; i < request_.n; ++i) Emit(json_.RoleChunk(i));
  }
  if (!run_->Drive(
          kPollInterval, [&] { return Flush(sink) && sink.is_writable(); },
          [&](CompletionRun::Event& e) { Handle(e); })) {
    outcome_ = "CANCELLED";
    return false;
  }
  if (!error_.ok()) {
    outcome_ = MetricsCode(error_);
    if (!request_.stream) return false;
    pending_ += "data: " + ErrorBody(ToApiError(error_)) + "\n\n";
  } else if (request_.stream) {
    if (request_.include_usage) Emit(json_.UsageChunk(usage_));
    pending_ += "data: [DONE]\n\n";
  } else {
    pending_ = DumpJson(json_.Whole(choices_, usage_));
  }
  if (!Flush(sink)) {
    outcome_ = "CANCELLED";
    return false;
  }
  sink.done();
  return true;
}

void CompletionResponder::Handle(CompletionRun::Event& event) {
  if (!error_.ok()) return;  // failed: the rest is cancelled and not shown
  if (event.done.has_value()) {
    absl::StatusOr<GenerationResult>& result = *event.done;
    if (!result.ok()) {
      Fail(result.status());
    } else if (result->finish_reason == FinishReason::kCancelled) {
      // Not the client (it is still here): the server is shutting down.
      Fail(absl::UnavailableError("the request was cancelled: the server is shutting down"));
    } else {
      HandleResult(event.request, *result);
    }
    return;
  }
  // Deltas of a beam search are the best hypothesis' certain prefix: choice 0.
  const int index = request_.beam() ? 0 : event.request;
  ChoiceText& choice = choices_[index];
  choice.text += event.delta.text;
  choice.tokens.insert(choice.tokens.end(), event.delta.tokens.begin(), event.delta.tokens.end());
  StreamText(index, event.delta.text, event.delta.tokens);
}

void CompletionResponder::StreamText(int index, std::string_view text,
                                     absl::Span<const GeneratedToken> tokens) {
  ChoiceText& choice = choices_[index];
  if (request_.endpoint != Endpoint::kChat) {
    if (request_.stream) Emit(json_.DeltaChunk(index, text, tokens, choice));
    return;
  }
  // Chat: the text read as content, reasoning and tool calls; the tokens ride on the first
  // piece (or on an empty content piece when the text completes none yet, for their logprobs).
  std::vector<AssistantOutputEvent> events;
  choice.answer.Feed(text, &events);
  if (!request_.stream) return;
  bool tokens_sent = tokens.empty();
  for (const AssistantOutputEvent& e : events) {
    if (e.type == AssistantOutputEvent::Type::kToolCallEnd) continue;
    Emit(json_.EventChunk(index, e, tokens_sent ? absl::Span<const GeneratedToken>() : tokens,
                          choice));
    tokens_sent = true;
  }
  if (!tokens_sent && request_.logprobs) {
    AssistantOutputEvent empty;
    Emit(json_.EventChunk(index, empty, tokens, choice));
  }
}

void CompletionResponder::HandleResult(int request, const GenerationResult& result) {
  if (!prompt_counted_) {
    usage_.prompt_tokens = result.stats.prompt_tokens;
    usage_.cached_tokens = result.stats.cached_tokens;
    prompt_counted_ = true;
  }
  usage_.drafted_tokens += result.stats.drafted_tokens;
  usage_.accepted_tokens += result.stats.accepted_tokens;
  if (!request_.beam()) {
    usage_.completion_tokens += result.stats.generated_tokens;
    const std::string text = result.hypotheses.empty() ? "" : result.hypotheses[0].text;
    FinishChoice(request, text, result.tokens, result.finish_reason);
    return;
  }
  for (size_t k = 0; k < result.hypotheses.size() && k < choices_.size(); ++k) {
    const Hypothesis& h = result.hypotheses[k];
    usage_.completion_tokens += static_cast<int>(h.ids.size());
    std::vector<GeneratedToken> tokens;
    if (k == 0) {
      tokens = result.tokens;  // the best's tokens, as streamed
    } else {
      for (size_t i = 0; i < h.ids.size(); ++i) {
        GeneratedToken t;
        t.id = h.ids[i];
        t.logprob = i < h.logprobs.size() ? h.logprobs[i] : 0;
        tokens.push_back(std::move(t));
      }
    }
    FinishChoice(static_cast<int>(k), h.text, std::move(tokens), h.finish_reason);
  }
}

void CompletionResponder::FinishChoice(int index, const std::string& text,
                                       std::vector<GeneratedToken> tokens, FinishReason reason) {
  ChoiceText& choice = choices_[index];
  // The stream carried a prefix of the final text (all of it, except for a beam search's
  // uncertain tail and the choices after the best); send the rest.
  if (text.starts_with(choice.text) &&
      (text.size() > choice.text.size() || tokens.size() > choice.tokens.size())) {
    const std::string rest = text.substr(choice.text.size());
    std::vector<GeneratedToken> rest_tokens;
    if (tokens.size() > choice.tokens.size()) {
      rest_tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(choice.tokens.size()),
                         tokens.end());
    }
    StreamText(index, rest, rest_tokens);
  }
  choice.text = text;
  choice.tokens = std::move(tokens);
  std::vector<AssistantOutputEvent> events;
  choice.answer.Finish(&events);
  if (request_.stream) {
    for (const AssistantOutputEvent& e : events) {
      if (e.type != AssistantOutputEvent::Type::kToolCallEnd) {
        Emit(json_.EventChunk(index, e, {}, choice));
      }
    }
  }
  choice.end = AnswerEndOf(reason, choice.answer.made_tool_calls());
  Emit(json_.FinishChunk(index, *choice.end));
}

void CompletionResponder::Fail(const absl::Status& status) {
  error_ = status;
  run_->Cancel();
}

}  // namespace textgen::server::openai
