// Internal: token masks of matcher states, and the per-grammar cache behind them.
#ifndef TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_
#define TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_

#include <cstdint>
#include <memory>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/stack_ops.h"
#include "engine/grammar/token_bitmask.h"

namespace textgen::grammar_internal {

// The state after accepting token `id` in `state`, or null if the grammar does not allow it.
std::shared_ptr<const MatcherState> NextState(const CompiledGrammar& compiled,
                                              const std::shared_ptr<const MatcherState>& state,
                                              int32_t id);

// The tokens allowed in `state` (mask already sized to the vocabulary).
void FillMask(const CompiledGrammar& compiled, const MatcherState& state, TokenBitmask* mask);

class MaskCache {
 public:
  explicit MaskCache(const CompiledGrammar& compiled) : compiled_(compiled) {}
  CompiledGrammar::CacheStats stats() const { return {}; }

 private:
  const CompiledGrammar& compiled_;
};

}  // namespace textgen::grammar_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_MASK_CACHE_H_
