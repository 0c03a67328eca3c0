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
// Repeat counts: in a key whose repeat frame has a bound (char{0,100}), a short entry forgets the
// upper bound (and a lower bound above kClampBytes becomes Frame::kSticky), so one entry serves
// most positions of the repetition. It is exact for tokens of at most T = min(remaining maximum,
// kClampBytes) bytes (each iteration consumes a byte), and is used for those only; the tokens
// longer than T are classified by a second entry with the exact key, which walks only them.
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
  static constexpr int32_t kClampBytes = GrammarVocab::kLongTokenBytes;
  enum class Part : uint8_t {
    kAll,    // every token, exact key
    kShort,  // tokens of at most kClampBytes bytes, repeat counts clamped
    kLong,   // tokens longer than a threshold, exact key
  };
  // How a stack's mask is assembled: one kAll entry, or (split) the kShort entry restricted to
  // tokens of at most `threshold` bytes plus the kLong entry of the longer ones.
  struct Plan {
    bool split = false;
    int32_t threshold = 0;
  };

  explicit MaskCache(const CompiledGrammar& compiled);
  ~MaskCache();

  Plan MakePlan(const Stack& stack) const;
  // The entry for the top frames of `stack`. Never null; valid as long as the cache.
  const MaskEntry* Get(const Stack& stack, Part part, int32_t threshold);

  CompiledGrammar::CacheStats stats() const;

 private:
  std::vector<uint64_t> MakeKey(const Stack& stack, Part part, int32_t threshold) const;
  std::unique_ptr<MaskEntry> Compute(const std::vector<uint64_t>& key);

  const CompiledGrammar& compiled_;

  mutable std::shared_mutex mu_;
  absl::flat_hash_map<std::vector<uint64_t>, std::unique_ptr<MaskEntry>> entries_;
  int64_t bytes_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0};

  std::mutex compute_mu_;
  std::unique_ptr<MaskWalker> walker_;  // its DFA persists across computations (compute_mu_)
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_
