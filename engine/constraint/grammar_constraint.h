// Output constraints (decoding's TokenConstraint) over engine/grammar's matchers:
//   GrammarConstraint      the whole answer must be a sentence of the grammar (response_format,
//                          a forced tool call);
//   TriggeredConstraint    free text until a trigger (a tool call's opening marker) appears,
//                          then the grammar applies from the trigger on (tool_choice auto, as
//                          llama.cpp's lazy grammars).
#ifndef TEXTGEN_ENGINE_CONSTRAINT_GRAMMAR_CONSTRAINT_H_
#define TEXTGEN_ENGINE_CONSTRAINT_GRAMMAR_CONSTRAINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/decoding/token_constraint.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_bitmask.h"

namespace textgen {

// Sets logits[i] to -inf for every i whose bit in `mask` is clear (ids past the mask's words
// too). Returns whether any bit of the first logits.size() ids is set. What GrammarConstraint::Mask
// does after filling the mask (exposed for benchmarks).
bool ApplyTokenBitmask(const TokenBitmask& mask, absl::Span<float> logits);

class GrammarConstraint : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar)
      : matcher_(std::move(grammar)) {}
  explicit GrammarConstraint(GrammarMatcher matcher) : matcher_(std::move(matcher)) {}

  std::unique_ptr<TokenConstraint> Clone() const override;
  bool Mask(absl::Span<float> logits) const override;
  bool Accept(int32_t token) override { return matcher_.AcceptToken(token); }
  bool Complete() const override { return matcher_.IsTerminated(); }

  const GrammarMatcher& matcher() const { return matcher_; }

 private:
  GrammarMatcher matcher_;
  mutable TokenBitmask mask_;  // scratch, reused across steps
};

// Where a triggered grammar starts.
struct ConstraintTrigger {
  // The answer's text (the bytes of its tokens, shown special tokens as their text) contains
  // this; the grammar is matched from its first byte.
  std::string text;
  // Only at the answer's start (after whitespace): e.g. Llama 3.x's bare {"name": ...}.
  bool at_start = false;
};

class TriggeredConstraint : public TokenConstraint {
 public:
  // `token_text(id)`: a token's text as the answer shows it (decoding's shown specials as
  // their text). The grammar's sentences must begin with the trigger's text.
  TriggeredConstraint(std::shared_ptr<const CompiledGrammar> grammar,
                      std::vector<ConstraintTrigger> triggers,
                      std::function<std::string_view(int32_t)> token_text);

  std::unique_ptr<TokenConstraint> Clone() const override;
  bool Mask(absl::Span<float> logits) const override;
  bool Accept(int32_t token) override;
  bool Complete() const override { return active_.has_value() && active_->Complete(); }

  bool triggered() const { return active_.has_value(); }

 private:
  // Looks for a trigger in text_; activates the grammar on the text from it.
  void MaybeTrigger();

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const std::vector<ConstraintTrigger>> triggers_;
  std::function<std::string_view(int32_t)> token_text_;
  std::string text_;  // the answer so far (or its tail), until triggered
  size_t longest_trigger_ = 0;
  bool past_start_ = false;  // at_start triggers can no longer match
  bool gave_up_ = false;     // a trigger came but its text did not fit the grammar
  std::optional<GrammarConstraint> active_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CONSTRAINT_GRAMMAR_CONSTRAINT_H_
