// Internal: classifies the vocabulary's tokens for one mask-cache key (see mask_cache.h) by
// walking them in sorted order through a lazily built DFA whose states are sets of local
// stacks. The DFA is kept across walks of the same grammar (many keys reach the same states,
// e.g. the inside of a JSON string).
#ifndef TEXTGEN_ENGINE_GRAMMAR_MASK_WALKER_H_
#define TEXTGEN_ENGINE_GRAMMAR_MASK_WALKER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/mask_cache.h"
#include "engine/grammar/stack_ops.h"

namespace textgen::grammar_internal {

class MaskWalker {
 public:
  explicit MaskWalker(const CompiledGrammar& compiled);

  // Classifies tokens for the advanced local stack `frames` (bottom..top). `whole`: nothing lies
  // below (popping the bottom frame completes the sentence). Tokens walked: `list` (sorted-order
  // indices, ascending, with `list_lcp` their common prefixes) or, if null, every byte-matchable
  // token of at most `max_len` bytes.
  std::unique_ptr<MaskEntry> Run(const Stack& frames, bool whole, int32_t max_len,
                                 const std::vector<int32_t>* list,
                                 const std::vector<int32_t>* list_lcp);

  int64_t num_states() const { return static_cast<int64_t>(states_.size()); }

 private:
  struct State {
    std::vector<Stack> stacks;        // known paths (advanced, non-empty)
    bool end_ok = false;              // a path completed or left the known frames exactly here
    ByteSet follow{};                 // next bytes that continue into unknown frames (uncertain)
    bool terminal = false;            // no stacks and no follow: nothing known or uncertain goes on
    std::unique_ptr<int32_t[]> next;  // [256] transitions, -1 = not computed yet
  };

  int32_t Intern(std::vector<Stack> stacks, bool end_ok, const ByteSet& follow);
  int32_t Transition(int32_t s, uint8_t b);
  // Keeps only the states on the current walk path when the DFA grew too large.
  void Shrink(std::vector<int32_t>* path, int32_t depth);

  const CompiledGrammar& compiled_;
  const GrammarVocab& vocab_;
  Expander expander_;
  Bottom bottom_ = Bottom::kUnknown;  // of the current walk; part of every state's identity
  std::vector<State> states_;
  absl::flat_hash_map<std::vector<uint64_t>, int32_t> ids_;
  std::vector<uint64_t> key_scratch_;
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_MASK_WALKER_H_
