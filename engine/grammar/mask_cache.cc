#include "engine/grammar/mask_cache.h"

namespace textgen::grammar_internal {

void FillMask(const CompiledGrammar& compiled, const MatcherState& state, TokenBitmask* mask) {
  // Reference implementation: every token tried on the state.
  mask->Clear();
  auto shared = std::make_shared<MatcherState>(state);
  for (int32_t id = 0; id < compiled.vocab()->size(); ++id) {
    if (NextState(compiled, shared, id) != nullptr) mask->Set(id);
  }
}

}  // namespace textgen::grammar_internal
