// A generation's output stream: the tokens its chooser commits become StreamDeltas of whole
// UTF-8 characters, with stop strings cut off (see StopMatcher).
#ifndef TEXTGEN_ENGINE_DECODING_STREAM_ASSEMBLER_H_
#define TEXTGEN_ENGINE_DECODING_STREAM_ASSEMBLER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/decoding/generation_output.h"
#include "engine/decoding/stop_matcher.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

// Assembles the stream from tokens that are certain to begin the answer, in order: each
// Commit sends one delta with those tokens (their text filled in) and the text that has become
// safe to show. Text that may still turn into a stop string is held back; once a stop string
// completes, the text before it is the last shown (stopped() then), though later commits still
// carry their tokens. Finish flushes what was held back. The concatenated delta texts equal
// AnswerText of all committed ids, cut at its stop_at.
//
// Greedy / sampling commit each token as it is chosen; beam search commits the growth of the
// certain prefix and, at the end, the rest of the best hypothesis.
//
// Not thread-safe. The tokenizer must outlive it; `sink` (may be null) is called on the
// caller's thread.
class StreamAssembler {
 public:
  // `shown_special`: control tokens whose text is output (DecodingOptions::shown_special_tokens,
  // any order). Empty `stops` entries are ignored.
  StreamAssembler(const Tokenizer& tokenizer, std::vector<int32_t> shown_special,
                  std::vector<std::string> stops, StreamSink sink);

  // Tokens now certain to begin the answer, `text` unset (filled here). Sends one delta with
  // them and the newly safe text; nothing when `tokens` is empty.
  void Commit(std::vector<GeneratedToken> tokens);
  // The answer is complete: commits its last `tokens` (possibly none) and flushes the held-back
  // bytes and text into one last delta, sent unless it is empty.
  void Finish(std::vector<GeneratedToken> tokens);

  // A stop string completed: no text after the one before it is shown.
  bool stopped() const { return stop_.stopped(); }
  // Text shown so far (the concatenated deltas).
  const std::string& text() const { return text_; }
  // Tokens committed so far.
  int num_tokens() const { return static_cast<int>(tokens_.size()); }
  // Every committed token with its text (empties the list).
  std::vector<GeneratedToken> TakeTokens() { return std::exchange(tokens_, {}); }

 private:
  // Adds the tokens' text; appends them to the delta and to tokens_. Returns their text.
  std::string AddTokens(std::vector<GeneratedToken> tokens, StreamDelta* delta);
  void Send(const StreamDelta& delta);

  StreamSink sink_;
  IncrementalDetokenizer detok_;
  StopMatcher stop_;
  std::string text_;
  std::vector<GeneratedToken> tokens_;
};

// The text of `ids` as a stream shows it (the `shown_special` control tokens' text included,
// valid UTF-8; `shown_special` ascending). `*stop_at` (optional): where the stop string that
// completes first begins, by the stream's own matcher (so a text cut there equals what a
// stream showed), or npos when none completes.
std::string AnswerText(const Tokenizer& tokenizer, const std::vector<int32_t>& shown_special,
                       const std::vector<std::string>& stops, absl::Span<const int32_t> ids,
                       size_t* stop_at = nullptr);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_STREAM_ASSEMBLER_H_
