#include "engine/tokenizer/incremental_detokenizer.h"

#include "engine/tokenizer/unicode.h"

namespace textgen {

std::string IncrementalDetokenizer::Add(int32_t id) {
  if (!shown_.empty() && std::binary_search(shown_.begin(), shown_.end(), id)) {
    pending_.append(tokenizer_->TokenText(id));
  } else {
    pending_.append(tokenizer_->TokenBytes(id));
  }
  // Bytes that could still become a character wait; everything before them is final: a
  // sequence that is already ill-formed cannot be repaired by later bytes.
  const size_t hold = IncompleteUtf8Tail(pending_);
  const std::string_view ready = std::string_view(pending_).substr(0, pending_.size() - hold);
  std::string out = IsValidUtf8(ready) ? std::string(ready) : SanitizeUtf8(ready);
  pending_.erase(0, ready.size());
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace textgen
