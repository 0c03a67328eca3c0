// Internal: token masks of matcher states, and the per-grammar cache behind them.
//
// A matcher state is a set of parse stacks. For each stack the tokens allowed depend mostly on
// its top frames, so masks are cached per "key": the top two frames (repeat counts clamped, see
// below), plus whether they are the whole stack. For a key, every byte-matchable token is
// classified once by walking the vocabulary in sorted order (shared prefixes walked once, dead
// branches skipped) through a lazily built DFA over sets of local stacks:
//   accepted  - some path consumes the token inside the known frames: allowed whatever lies below;
//   rejected  - no path survives, and none leaves the known frames;
//   uncertain - only paths that pop below the known frames survive (after the FOLLOW-set check);
//               these few are checked against the whole stack at run time.
// Popping a rule whose only call site is fixed continues at that call site's return node, so a
// JSON object's properties are followed across rule boundaries without any uncertainty.
//
// Repeat counts: a key whose repeat frame still needs or allows more than kClampBytes iterations
// stores "more than kClampBytes" instead (Frame::kSticky / kInf), so `char{0,1000}` shares one
// entry for most positions. That entry is exact for tokens of at most kClampBytes bytes (each
// iteration consumes a byte); longer tokens are classified in a second, exact-key entry that
// walks only them.
#ifndef TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_
#define TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/stack_ops.h"
#include "engine/grammar/token_bitmask.h"

namespace textgen::grammar_internal {

class MaskWalker;

// The state after accepting token `id` in `state`, or null if the grammar does not allow it.
std::shared_ptr<const MatcherState> NextState(const CompiledGrammar& compiled,
                                              const std::shared_ptr<const MatcherState>& state,
                                              int32_t id);

// The tokens allowed in `state` (mask already sized to the vocabulary, any content).
void FillMask(const CompiledGrammar& compiled, const MatcherState& state, TokenBitmask* mask);

// The classification of the tokens for one key.
struct MaskEntry {
  // Accepted ids: a bitset over the vocabulary when many, else a sorted list.
  std::vector<uint64_t> bits;  // [ceil(vocab / 64)] or empty
  std::vector<int32_t> ids;
  // Indices into GrammarVocab's sorted order, ascending: to check against the whole stack.
  std::vector<int32_t> uncertain;
  int64_t Bytes() const {
    return static_cast<int64_t>(bits.size() * 8 + ids.size() * 4 + uncertain.size() * 4);
  }
};

// Thread-safe: lookups share a lock; computing an entry holds the compute mutex (one walk at a
// time per grammar) but not the lookup lock.
class MaskCache {
 public:
  static constexpr int kClampBytes = 32;
  enum class Part : uint8_t { kAll, kShort, kLong };

  explicit MaskCache(const CompiledGrammar& compiled);
  ~MaskCache();

  // The entry for the top frames of `stack` (kAll: every token; kShort: tokens of at most
  // kClampBytes bytes, with counts clamped; kLong: the longer ones). Never null.
  const MaskEntry* Get(const Stack& stack, Part part);
  // Whether the stack's key has counts above kClampBytes (then kShort + kLong, else kAll).
  bool NeedsClamp(const Stack& stack) const;

  CompiledGrammar::CacheStats stats() const;

 private:
  std::vector<uint64_t> MakeKey(const Stack& stack, Part part) const;
  std::unique_ptr<MaskEntry> Compute(const std::vector<uint64_t>& key);

  const CompiledGrammar& compiled_;
  std::vector<int32_t> long_tokens_;  // sorted-order indices of tokens longer than kClampBytes
  std::vector<int32_t> long_lcp_;     // lcp with the previous long token

  mutable std::shared_mutex mu_;
  absl::flat_hash_map<std::vector<uint64_t>, std::unique_ptr<MaskEntry>> entries_;
  int64_t bytes_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0};

  std::mutex compute_mu_;
  std::unique_ptr<MaskWalker> walker_;  // its DFA persists across computations (compute_mu_)
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_
