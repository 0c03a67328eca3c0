// Streams decoded text token by token without ever splitting a UTF-8 character.
#ifndef TEXTGEN_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define TEXTGEN_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace textgen {

// One per output stream (not thread-safe; the Tokenizer must outlive it). Every returned piece
// is valid UTF-8: trailing bytes of an incomplete character are held back until the next
// token completes them, and ill-formed bytes are replaced by U+FFFD. For ids whose Decode is
// valid UTF-8, the concatenation of all Add results and Flush equals Tokenizer::Decode.
class IncrementalDetokenizer {
 public:
  // `shown` (sorted ascending): control tokens whose text counts as output (e.g. tool-call
  // markers); every other control token contributes nothing, as in Tokenizer::Decode.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, std::vector<int32_t> shown = {})
      : tokenizer_(&tokenizer), shown_(std::move(shown)) {}

  // Appends the token's bytes (nothing for out-of-range ids) and returns the newly completed
  // text, possibly empty.
  std::string Add(int32_t id);
  // Returns whatever is held back, with an incomplete trailing character as U+FFFD, and resets.
  std::string Flush();
  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> shown_;
  std::string pending_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
