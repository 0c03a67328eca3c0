#include "engine/decoding/sequence_feed.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace textgen {

SequenceFeed::SequenceFeed(BlockTable table, std::vector<int32_t> target)
    : table_(std::move(table)), target_(std::move(target)) {}

void SequenceFeed::Append(absl::Span<const int32_t> tokens) {
  target_.insert(target_.end(), tokens.begin(), tokens.end());
}

int SequenceFeed::Prepare(int max_tokens, std::vector<ForwardSeq>* seqs, Rows rows) {
  pending_ = std::clamp(left(), 0, std::max(0, max_tokens));
  if (pending_ == 0) return 0;
  ForwardSeq fs;
  fs.tokens = absl::MakeConstSpan(target_).subspan(computed(), pending_);
  fs.table = &table_;
  fs.pos0 = table_.num_tokens;  // positions equal slots, also after a shift
  fs.all_logits = rows == Rows::kAll;
  fs.logits = rows == Rows::kAll || (rows == Rows::kLast && pending_ == left());
  seqs->push_back(fs);
  return pending_;
}

int SequenceFeed::Commit() { return std::exchange(pending_, 0); }

void SequenceFeed::Truncate(KvCache& cache, int n) {
  n = std::clamp(n, 0, static_cast<int>(target_.size()));
  target_.resize(n);
  if (table_.num_tokens > n) cache.Truncate(table_, n);
  pending_ = 0;
}

absl::Status SequenceFeed::Rollback(KvCache& cache, int n) {
  if (n < 0 || n > static_cast<int>(target_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot roll a feed of ", target_.size(), " tokens back to ", n));
  }
  if (table_.num_tokens > n) TG_RETURN_IF_ERROR(cache.Rollback(table_, n));
  target_.resize(n);
  pending_ = 0;
  return absl::OkStatus();
}

void SequenceFeed::Restart(KvCache& cache) {
  cache.Free(table_);
  pending_ = 0;
}

void SequenceFeed::Drop(int keep, int n) {
  const int from = std::clamp(keep, 0, static_cast<int>(target_.size()));
  const int to = std::clamp(keep + n, from, static_cast<int>(target_.size()));
  target_.erase(target_.begin() + from, target_.begin() + to);
}

SequenceFeed SequenceFeed::Fork(KvCache& cache) const {
  return SequenceFeed(cache.Fork(table_), target_);
}

void SequenceFeed::Free(KvCache& cache) {
  cache.Free(table_);
  pending_ = 0;
}

}  // namespace textgen
