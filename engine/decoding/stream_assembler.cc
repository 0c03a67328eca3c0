#include "engine/decoding/stream_assembler.h"

#include <algorithm>
#include <utility>

namespace textgen {
namespace {

std::vector<int32_t> Sorted(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

StreamAssembler::StreamAssembler(const Tokenizer& tokenizer, std::vector<int32_t> shown_special,
                                 std::vector<std::string> stops, StreamSink sink)
    : sink_(std::move(sink)),
      detok_(tokenizer, Sorted(std::move(shown_special))),
      stop_(std::move(stops)) {}

std::string StreamAssembler::AddTokens(std::vector<GeneratedToken> tokens, StreamDelta* delta) {
  std::string text;
  for (GeneratedToken& t : tokens) {
    t.text = detok_.Add(t.id);
    text += t.text;
    tokens_.push_back(t);
    delta->tokens.push_back(std::move(t));
  }
  return text;
}

void StreamAssembler::Send(const StreamDelta& delta) {
  text_ += delta.text;
  if (sink_) sink_(delta);
}

void StreamAssembler::Commit(std::vector<GeneratedToken> tokens) {
  if (tokens.empty()) return;
  StreamDelta delta;
  const std::string text = AddTokens(std::move(tokens), &delta);
  // Once stopped, tokens still arrive (a beam's certain prefix may run past the stop string
  // the stream met), but their text is never shown.
  if (!stop_.stopped()) delta.text = stop_.Push(text);
  Send(delta);
}

void StreamAssembler::Finish(std::vector<GeneratedToken> tokens) {
  StreamDelta delta;
  std::string text = AddTokens(std::move(tokens), &delta);
  text += detok_.Flush();
  if (!stop_.stopped()) {
    delta.text = stop_.Push(text);
    delta.text += stop_.Flush();  // "" once stopped
  }
  if (!delta.text.empty() || !delta.tokens.empty()) Send(delta);
}

std::string AnswerText(const Tokenizer& tokenizer, const std::vector<int32_t>& shown_special,
                       const std::vector<std::string>& stops, absl::Span<const int32_t> ids,
                       size_t* stop_at) {
  IncrementalDetokenizer detok(tokenizer, shown_special);
  std::string text;
  for (int32_t id : ids) text += detok.Add(id);
  text += detok.Flush();
  if (stop_at != nullptr) {
    // Pushed whole, the matcher returns the text before the first stop string to complete.
    StopMatcher m(stops);
    const size_t before = m.Push(text).size();
    *stop_at = m.stopped() ? before : std::string::npos;
  }
  return text;
}

}  // namespace textgen
