// Constrained decoding's seam in the engine: a rule over which tokens may come next, kept per
// sequence. A grammar (JSON Schema, regex, GBNF), a grammar that starts at a trigger (tool
// calls under tool_choice auto), a thinking budget that closes the reasoning block: each is a
// TokenConstraint (built outside decoding, e.g. engine/grammar's GrammarConstraint), so decoding
// depends on this interface only.
//
// Generation masks every choice with the sequence's constraint before the repetition penalty,
// sampling (temperature, top-k/p, min-p act on the allowed tokens) or beam scoring, then
// tells it the chosen token. Masking acts on each logits row alone, so batch invariance holds.
#ifndef TEXTGEN_ENGINE_DECODING_TOKEN_CONSTRAINT_H_
#define TEXTGEN_ENGINE_DECODING_TOKEN_CONSTRAINT_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/types/span.h"

namespace textgen {

// One sequence's state. Not thread-safe; Generation owns one per live sequence.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // A copy in the same state (a beam's child continues its parent).
  virtual std::unique_ptr<TokenConstraint> Clone() const = 0;
  // Sets the logits [vocab] of every token that may not come next to -inf. End-of-generation
  // tokens are allowed exactly where the output may end. Returns false when no token at all
  // may come next (a grammar the vocabulary cannot continue): the request then fails.
  virtual bool Mask(absl::Span<float> logits) const = 0;
  // The token chosen (one Mask allowed). Returns false if it was not allowed after all.
  virtual bool Accept(int32_t token) = 0;
  // The output is complete and nothing may follow: generation ends here
  // (FinishReason::kConstraintComplete) without waiting for an end-of-generation token.
  virtual bool Complete() const = 0;
};

// Makes the constraint of a request's first sequence (DecodingOptions::constraint).
using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_TOKEN_CONSTRAINT_H_
