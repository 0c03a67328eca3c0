#include "engine/decoding/ngram_drafter.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "engine/util/mix64.h"

namespace textgen {

absl::Status ValidateNgramDrafterOptions(const NgramDrafterOptions& o) {
  if (o.min_ngram < 1 || o.min_ngram > o.max_ngram || o.max_ngram > kMaxNgram) {
    return absl::InvalidArgumentError(
        absl::StrCat("n-gram drafter: need 1 <= min_ngram <= max_ngram <= ", kMaxNgram, ", got ",
                     o.min_ngram, " and ", o.max_ngram));
  }
  return absl::OkStatus();
}

NgramDrafter::NgramDrafter(const NgramDrafterOptions& options) : options_(options) {
  assert(ValidateNgramDrafterOptions(options).ok());
}

void NgramDrafter::KeysEndingAt(int end, int max_n, uint64_t* keys) const {
  // Chained backwards from `end`, so one pass gives every length; the length is mixed into
  // the key so that different n never share an entry.
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int n = 1; n <= max_n; ++n) {
    h = Mix64(h ^ static_cast<uint32_t>(history_[end - n + 1]));
    if (n >= options_.min_ngram) keys[n] = Mix64(h + static_cast<uint64_t>(n));
  }
}

bool NgramDrafter::SameNgram(int a, int b, int n) const {
  return std::equal(history_.begin() + (a - n + 1), history_.begin() + (a + 1),
                    history_.begin() + (b - n + 1));
}

void NgramDrafter::Append(int32_t token) {
  undo_mark_.push_back(static_cast<uint32_t>(undo_.size()));
  history_.push_back(token);
  // The n-grams ending just before the new token now have a follower: index them.
  const int end = size() - 2;
  if (end < 0) return;
  const int max_n = std::min(options_.max_ngram, end + 1);
  if (max_n < options_.min_ngram) return;
  uint64_t keys[kMaxNgram + 1];
  KeysEndingAt(end, max_n, keys);
  for (int n = options_.min_ngram; n <= max_n; ++n) {
    auto [it, inserted] = last_end_.try_emplace(keys[n], end);
    undo_.push_back({keys[n], inserted ? -1 : it->second});
    it->second = end;
  }
}

void NgramDrafter::Append(absl::Span<const int32_t> tokens) {
  for (int32_t t : tokens) Append(t);
}

int NgramDrafter::Propose(int max_tokens, std::vector<int32_t>& out) const {
  out.clear();
  const int len = size();
  // An earlier occurrence ends at len - 2 at the latest, so n <= len - 1.
  const int max_n = std::min(options_.max_ngram, len - 1);
  if (max_tokens <= 0 || max_n < options_.min_ngram) return 0;
  max_tokens = std::min(max_tokens, kMaxDraftTokens);
  uint64_t keys[kMaxNgram + 1];
  KeysEndingAt(len - 1, max_n, keys);
  for (int n = max_n; n >= options_.min_ngram; --n) {
    const auto it = last_end_.find(keys[n]);
    if (it == last_end_.end() || !SameNgram(it->second, len - 1, n)) continue;
    const int end = it->second;
    out.reserve(max_tokens);
    for (int j = 0; j < max_tokens; ++j) {
      // end + 1 + j < len + j: past the history, the source is an earlier proposed token.
      const int src = end + 1 + j;
      out.push_back(src < len ? history_[src] : out[src - len]);
    }
    return n;
  }
  return 0;
}

absl::Status NgramDrafter::Truncate(int length) {
  if (length < 0 || length > size()) {
    return absl::InvalidArgumentError(absl::StrCat("n-gram drafter: cannot truncate a history of ",
                                                   size(), " tokens to ", length));
  }
  if (length == size()) return absl::OkStatus();
  // Undo in reverse order, so that an entry overwritten several times ends at its oldest value.
  const size_t mark = undo_mark_[length];
  for (size_t i = undo_.size(); i-- > mark;) {
    const Undo& u = undo_[i];
    if (u.previous < 0) {
      last_end_.erase(u.key);
    } else {
      last_end_[u.key] = u.previous;
    }
  }
  undo_.resize(mark);
  undo_mark_.resize(length);
  history_.resize(length);
  return absl::OkStatus();
}

void NgramDrafter::Reset() {
  history_.clear();
  last_end_.clear();
  undo_.clear();
  undo_mark_.clear();
}

}  // namespace textgen
