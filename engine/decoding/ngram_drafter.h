// Prompt lookup / n-gram drafting for speculative decoding: the tokens that followed the most
// recent earlier occurrence of the text's last few tokens, proposed as the next ones.
#ifndef TEXTGEN_ENGINE_DECODING_NGRAM_DRAFTER_H_
#define TEXTGEN_ENGINE_DECODING_NGRAM_DRAFTER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace textgen {

struct NgramDrafterOptions {
  // The suffix lengths tried, longest first. A longer match is better evidence that the text
  // is repeating a passage. The minimum defaults to 2 rather than 1: a lone token (",", "the")
  // has occurred before in almost every text, so a 1-gram matches on nearly every step, and
  // what followed its last occurrence is a guess about as good as the token's frequency; each
  // such draft costs a verification pass (k+1 rows) that is then mostly rejected. Two tokens
  // match far less often, and then mostly where a passage really repeats (names, refrains,
  // quoted prompt text). Set min_ngram = 1 to draft on every step.
  int min_ngram = 2;
  int max_ngram = 4;
};
inline constexpr int kMaxNgram = 16;
// Proposals are capped at this many tokens whatever the caller asks (a verification pass of
// more rows would cost more than it could save).
inline constexpr int kMaxDraftTokens = 64;

// InvalidArgument unless 1 <= min_ngram <= max_ngram <= kMaxNgram.
absl::Status ValidateNgramDrafterOptions(const NgramDrafterOptions& o);

// Holds a token history (prompt + generated so far) and an index, updated per appended token,
// from each n-gram (min_ngram <= n <= max_ngram) to the end of its most recent occurrence that
// has a token after it. Proposing costs O(max_ngram^2 + k) whatever the history's length;
// appending O(max_ngram); truncating O(max_ngram) per removed token (an undo log restores the
// entries the removed tokens overwrote). Memory: about 16 bytes per token and n-gram length.
//
// Deterministic: the proposal is a function of the history alone. Token ids are opaque (any
// int32_t). Not thread-safe; one per sequence.
class NgramDrafter {
 public:
  explicit NgramDrafter(const NgramDrafterOptions& options);  // options must be valid

  void Append(int32_t token);
  void Append(absl::Span<const int32_t> tokens);

  // Fills `out` (cleared first) with up to `max_tokens` (at most kMaxDraftTokens) proposed
  // next tokens and returns the length n of the matched suffix, or 0 (and `out` empty) when no
  // suffix of min_ngram..max_ngram tokens occurred earlier, or max_tokens <= 0. The longest
  // matching n wins; among occurrences of that n-gram, the most recent. The proposal is what
  // followed it; where that runs into the suffix itself (a repeating loop, "a b a b a b"), the
  // copy continues over its own proposed tokens, i.e. the loop is assumed to go on. So a match
  // yields exactly min(max_tokens, kMaxDraftTokens) tokens.
  int Propose(int max_tokens, std::vector<int32_t>& out) const;

  // Keeps the first `length` tokens (rejected drafts, a session rolled back) as if only they
  // had been appended. InvalidArgument, changing nothing, unless 0 <= length <= size().
  absl::Status Truncate(int length);
  void Reset();

  int size() const { return static_cast<int>(history_.size()); }
  absl::Span<const int32_t> history() const { return history_; }
  const NgramDrafterOptions& options() const { return options_; }

 private:
  // Fills keys[n] (min_ngram <= n <= max_n) with the index key of the n-gram ending at `end`
  // (inclusive); max_n <= end + 1.
  void KeysEndingAt(int end, int max_n, uint64_t* keys) const;
  // True if the n tokens ending at a and at b are equal.
  bool SameNgram(int a, int b, int n) const;

  struct Undo {
    uint64_t key;
    int32_t previous;  // the entry's end before the overwrite; -1: there was none
  };

  NgramDrafterOptions options_;
  std::vector<int32_t> history_;  // [size()]
  // n-gram key -> end (inclusive) of its most recent occurrence followed by a token. The
  // n-grams ending at position e are indexed when token e + 1 arrives, so the history's own
  // suffix is never its own match. Keys are hashes; a lookup compares the tokens, so a
  // collision can cost a proposal but never give a wrong one.
  absl::flat_hash_map<uint64_t, int32_t> last_end_;
  std::vector<Undo> undo_;           // every overwrite of last_end_, oldest first
  std::vector<uint32_t> undo_mark_;  // [size()] undo_.size() before token i's indexing
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_NGRAM_DRAFTER_H_
