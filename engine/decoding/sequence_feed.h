// One sequence's KV cache and the tokens it must hold: the "computed vs target" count behind
// every kind of work a generation runs through the model.
#ifndef TEXTGEN_ENGINE_DECODING_SEQUENCE_FEED_H_
#define TEXTGEN_ENGINE_DECODING_SEQUENCE_FEED_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache/block_table.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"

namespace textgen {

// A sequence's target -- the tokens its K/V must hold, in slot order (the context window: the
// prompt, then generated tokens, minus what a sliding window dropped) -- and its block table,
// which holds the K/V of the first computed() of them. What is left runs in chunks: Prepare
// adds the next chunk to a pass, and the model appends the chunk's K/V to the table when the
// pass runs; Commit then closes the chunk.
//
// One mechanism serves every kind of work:
//  - the prompt: target = the prompt, computed = the cached prefix's length (a session's or the
//    prefix cache's), so only the rest runs, in chunks under the step's token budget;
//  - decoding: each chosen token is appended, leaving one token to run;
//  - recomputing with the cache off: Restart empties the table before each choice, and the
//    whole window runs again;
//  - a session's catch-up after the answer: the kept table's feed, with the answer's tokens it
//    lacks appended (run without logits).
//
// Rolling back is Truncate: the target and the table both keep their first n tokens.
// Speculative decoding (not implemented yet) fits this way: Append the k drafted tokens after
// the last chosen one, Prepare them as one chunk with Rows::kAll (ForwardSeq::all_logits; k + 1
// rows: the verifier's distribution after each token), Commit, accept a prefix of n tokens, and
// Truncate(cache, computed() - k + n) so that the rejected drafts leave the target and their
// slots leave the table; then Append the corrected token as the next decode token.
//
// Owns its table: Free it (or take it) before the feed is dropped, like any BlockTable.
// Not thread-safe.
class SequenceFeed {
 public:
  SequenceFeed() = default;
  // `table` holds the K/V of the first table.num_tokens tokens of `target` (at most all).
  SequenceFeed(BlockTable table, std::vector<int32_t> target);
  SequenceFeed(SequenceFeed&&) = default;
  SequenceFeed& operator=(SequenceFeed&&) = default;

  const std::vector<int32_t>& target() const { return target_; }
  // Tokens of the target whose K/V the table holds (its num_tokens: a prepared chunk counts
  // once its pass has run).
  int computed() const { return table_.num_tokens; }
  // Tokens of the target not computed.
  int left() const { return static_cast<int>(target_.size()) - computed(); }
  bool complete() const { return left() <= 0; }
  // Tokens in the chunk Prepare last prepared (0 after Commit).
  int pending() const { return pending_; }
  BlockTable& table() { return table_; }
  const BlockTable& table() const { return table_; }

  // Extends the target (e.g. the chosen token, drafted tokens, an answer to catch up on).
  void Append(int32_t token) { target_.push_back(token); }
  void Append(absl::Span<const int32_t> tokens);

  // Which logits rows a chunk asks for.
  enum class Rows {
    kLast,  // one row, only when the chunk ends the target (prompt chunks, decoding)
    kAll,   // one row per token (verifying drafted tokens)
    kNone,  // none (a session's catch-up: nothing is chosen after it)
  };
  // Adds the next chunk to `seqs`: the first min(left(), max_tokens) tokens not computed.
  // Returns the chunk's size; adds nothing and returns 0 when that is 0. The ForwardSeq points
  // into this feed and is valid until the feed changes. Preparing again before the pass ran
  // replaces the chunk.
  int Prepare(int max_tokens, std::vector<ForwardSeq>* seqs, Rows rows = Rows::kLast);
  // The pass with the prepared chunk ran (its K/V are in the table): closes the chunk and
  // returns its size.
  int Commit();

  // Keeps the first `n` tokens of the target (n <= target().size()), and of the table what it
  // holds of them (rolls back the rejected drafts of a speculative pass).
  void Truncate(KvCache& cache, int n);
  // Truncate for rejected drafts: the table rolls back with KvCache::Rollback, so that no
  // published block keeps a rejected token (InvalidArgument, changing nothing, for n outside
  // [0, target().size()]).
  absl::Status Rollback(KvCache& cache, int n);
  // Recomputes from scratch: frees the table, so the whole target is left.
  void Restart(KvCache& cache);
  // Sliding window: target[keep, keep + n) left the context. The table must have dropped those
  // slots already (CausalLm::ShiftContext) or be empty.
  void Drop(int keep, int n);
  // A feed sharing this one's blocks (KvCache::Fork: copy-on-write) with a copy of its target.
  SequenceFeed Fork(KvCache& cache) const;
  // Frees the table (the target stays).
  void Free(KvCache& cache);
  // The table, leaving this feed's empty.
  BlockTable TakeTable() { return std::move(table_); }

 private:
  BlockTable table_;
  std::vector<int32_t> target_;
  int pending_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SEQUENCE_FEED_H_
