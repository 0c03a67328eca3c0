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

// Which tokens a walk visits: sorted-order indices (identity when `index` is null) with their
// lcp and next_smaller arrays (see GrammarVocab), and a byte-length window.
struct TokenList {
  const int32_t* index = nullptr;
  const int32_t* lcp = nullptr;
  const int32_t* next_smaller = nullptr;
  int32_t size = 0;
  int32_t min_len = 0, max_len = 0;
};

class MaskWalker {
 public:
  explicit MaskWalker(const CompiledGrammar& compiled);

  // Classifies the tokens of `list` for the advanced local stack `frames` (bottom..top).
  // `whole`: nothing lies below (popping the bottom frame completes the sentence).
  std::unique_ptr<MaskEntry> Run(const Stack& frames, bool whole, const TokenList& list);

  int64_t num_states() const { return static_cast<int64_t>(stacks_.size()); }

 private:
  static constexpr uint8_t kTerminal = 1;  // no stacks, no follow: nothing goes on from here
  static constexpr uint8_t kFollow = 2;    // some next bytes continue into unknown frames
  static constexpr uint8_t kAlive = 4;     // a token ending here is accepted
  static constexpr uint8_t kEndOk = 8;     // a path completed or left the known frames here
  // Run packs a state as (id << 4) | flags; bit 31 of that is never used (ids < 2^27), and kUnc
  // (in Run's path only) marks a path that went on into the unknown frames.
  static constexpr int32_t kUnc = 1 << 30;
  static constexpr int32_t kIdMask = (1 << 26) - 1;

  int32_t Intern(std::vector<Stack> stacks, bool end_ok, const ByteSet& follow);
  int32_t Transition(int32_t s, uint8_t b);
  // Keeps only the states on the current walk path when the DFA grew too large.
  void Shrink(std::vector<int32_t>* path, int32_t depth);
  void Clear();

  const CompiledGrammar& compiled_;
  const GrammarVocab& vocab_;
  Expander expander_;
  Bottom bottom_ = Bottom::kUnknown;  // of the current walk; part of every state's identity
  // The DFA, one entry per state: its stacks (known paths, advanced, non-empty), flags, the
  // bytes that continue into unknown frames, and [256] transitions (-1: not computed yet).
  std::vector<std::vector<Stack>> stacks_;
  std::vector<uint8_t> flags_;
  std::vector<ByteSet> follow_;
  std::vector<int32_t> next_;
  absl::flat_hash_map<std::vector<uint64_t>, int32_t> ids_;
  std::vector<uint64_t> key_scratch_;
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_MASK_WALKER_H_
