// Stop sequences matched on decoded text across token boundaries, holding back only the text
// that could still turn into a stop string.
#ifndef TEXTGEN_ENGINE_DECODING_STOP_MATCHER_H_
#define TEXTGEN_ENGINE_DECODING_STOP_MATCHER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace textgen {

inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxStopBytes = 256;

// InvalidArgument naming the field `stop`: more than kMaxStops entries, an entry longer than
// kMaxStopBytes, or one that is not valid UTF-8 (it could never match whole characters).
// Empty entries are allowed (the matcher ignores them).
absl::Status ValidateStops(const std::vector<std::string>& stops);

// Matching is on bytes; with valid UTF-8 stops and whole-character input, everything returned
// is whole characters too (a held-back suffix starts at a stop's first byte, a lead byte).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

  // Feeds newly decoded text (whole UTF-8 characters). Returns the text that is now safe to
  // emit: everything that can no longer be the start of a stop string. When a stop string
  // completes, `stopped()` becomes true, the returned text ends right before the stop string
  // (stop text is never returned), and further calls return "". If several stops complete in
  // the same push, the one ending first wins; among those ending at the same byte, the one
  // starting first (the longest).
  std::string Push(std::string_view text);
  // At end of generation: the held-back text (a partial stop prefix that never completed).
  // "" once stopped.
  std::string Flush();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // which stop string matched
  size_t held_back() const { return pending_.size(); }     // bytes currently withheld

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // the longest suffix of the text so far that is a stop's proper prefix
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_STOP_MATCHER_H_
