// Internal: the pushdown automaton's moves on parse stacks, shared by GrammarMatcher (whole
// stacks) and the mask builder (the top frames of a stack, with the rest unknown).
//
// A stack is its frames bottom..top (packed Frames). "Advanced" stacks wait for input: their top
// frame is at a consuming node (byte or token edges). The empty stack means the root rule has
// returned: the input so far is a complete sentence.
#ifndef TEXTGEN_ENGINE_GRAMMAR_STACK_OPS_H_
#define TEXTGEN_ENGINE_GRAMMAR_STACK_OPS_H_

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "engine/grammar/grammar.h"

namespace textgen::grammar_internal {

using Stack = std::vector<uint64_t>;
using ByteSet = std::array<uint64_t, 4>;

inline bool ByteSetHas(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

// Where Advance's stacks end below.
enum class Bottom {
  kWhole,    // the stack is complete: popping its last frame completes the sentence
  kUnknown,  // more frames lie below, unknown (mask building): popping the last frame either
             // continues at the rule's fixed return point or "exits" (see ExpandResult)
};

struct ExpandResult {
  std::vector<Stack> stacks;  // advanced stacks; with Bottom::kWhole the empty stack = complete
  bool complete = false;      // kWhole: some path completed the sentence
  bool exited = false;        // kUnknown: some path popped into the unknown frames below
  ByteSet exit_follow{};      // kUnknown: bytes that may come next after such an exit
  bool overflow = false;      // some path passed max_stack_depth and was dropped
};

// Reusable scratch space for Advance / Step (not thread-safe; one per thread or matcher call).
class Expander {
 public:
  Expander(const Grammar& g, int32_t max_stack_depth) : g_(g), max_depth_(max_stack_depth) {}

  // Adds every advanced stack reachable from `stack` without consuming input to `out`
  // (unsorted, possibly with duplicates across calls).
  void Advance(const Stack& stack, Bottom bottom, ExpandResult* out);

  // Consumes byte `b` from each advanced stack of `in` and advances the results into `out`.
  void Step(const std::vector<Stack>& in, uint8_t b, Bottom bottom, ExpandResult* out);

  // The stacks reached by consuming `token` (an id resolved against the grammar's token refs)
  // through a token element at the top of each stack of `in`. `is_eog`: NotToken never matches
  // an end-of-generation token.
  void StepToken(const std::vector<Stack>& in, const std::vector<int32_t>& ref_ids, int32_t token,
                 bool is_eog, ExpandResult* out);

  const Grammar& grammar() const { return g_; }

 private:
  struct Item {
    Stack stack;
    int32_t fresh;  // frames at index >= fresh were pushed during this Advance
  };
  void Push(Stack stack, int32_t fresh);

  const Grammar& g_;
  int32_t max_depth_;
  std::vector<Item> work_;
  absl::flat_hash_set<std::vector<uint64_t>> seen_;
};

// Sorts and deduplicates stacks (the canonical form of a matcher state), then keeps at most
// `max_stacks` of them (the first in that order): a pathologically ambiguous grammar narrows to
// some of its parses instead of growing without bound.
void Canonicalize(std::vector<Stack>* stacks, int32_t max_stacks = 1 << 30);

// One immutable GrammarMatcher state; states form a chain back to the start (for Rollback).
struct MatcherState {
  std::vector<Stack> stacks;  // canonical, advanced; the empty stack = complete
  bool eog = false;           // an EOG token was accepted: nothing may follow
  std::shared_ptr<const MatcherState> prev;
  int32_t depth = 0;  // accepted steps since the start
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_STACK_OPS_H_
