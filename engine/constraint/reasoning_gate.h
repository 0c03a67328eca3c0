// A thinking model's answer as a constraint: the reasoning block (<think>...</think> or the
// family's tags) is free text of at most `budget` tokens, after which its closing tag is forced;
// the answer after the block follows an inner constraint (a response_format grammar, a tool
// call's), so that structured output applies to the answer, never to the reasoning.
#ifndef TEXTGEN_ENGINE_CONSTRAINT_REASONING_GATE_H_
#define TEXTGEN_ENGINE_CONSTRAINT_REASONING_GATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/decoding/token_constraint.h"

namespace textgen {

struct ReasoningTags {
  std::string open;   // e.g. "<think>"
  std::string close;  // e.g. "</think>"
  // The token whose text is exactly `open`, or -1: a block can be opened under an inner
  // constraint only through it (tokens spelling it in pieces are text of the answer then).
  int32_t open_id = -1;
  // The tokens forced to close the block when the budget runs out (`close` tokenized).
  std::vector<int32_t> close_ids;
};

class ReasoningGate : public TokenConstraint {
 public:
  // Where the answer starts, as the rendered prompt left it.
  enum class Start {
    kMayOpen,  // the prompt's tail has no block: one may open at the answer's start
    kInside,   // the prompt opened the block (DeepSeek-R1 distills end it with "<think>\n")
    kAfter,    // the prompt closed it (Qwen3 with enable_thinking false): the open tag's
               // token is masked throughout, so no block opens
  };

  // `start`: see Start. `budget`: most reasoning tokens, unset = no limit. `inner`: the
  // answer's constraint, or null (free). `token_text(id)`: a token's text as the answer shows it.
  ReasoningGate(std::shared_ptr<const ReasoningTags> tags, Start start, std::optional<int> budget,
                std::unique_ptr<TokenConstraint> inner,
                std::function<std::string_view(int32_t)> token_text);
  ReasoningGate(const ReasoningGate& other);

  std::unique_ptr<TokenConstraint> Clone() const override;
  bool Mask(absl::Span<float> logits) const override;
  bool Accept(int32_t token) override;
  bool Complete() const override;

  int reasoning_tokens() const { return reasoning_tokens_; }

 private:
  enum class Phase {
    kStart,      // the answer's start: a block may open
    kReasoning,  // inside the block
    kClosing,    // the budget ran out: the closing tag's tokens are forced
    kAnswer,     // after the block (or without one): the inner constraint
  };
  // kReasoning, with the text so far: whether the block just closed.
  bool ClosedBy(std::string_view text);

  std::shared_ptr<const ReasoningTags> tags_;
  std::optional<int> budget_;
  std::unique_ptr<TokenConstraint> inner_;
  std::function<std::string_view(int32_t)> token_text_;
  Phase phase_ = Phase::kStart;
  bool open_masked_ = false;  // Start::kAfter
  std::string text_;          // kStart: the answer so far; kReasoning: the block's tail
  int reasoning_tokens_ = 0;
  size_t closing_pos_ = 0;  // kClosing: next of tags_->close_ids
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CONSTRAINT_REASONING_GATE_H_
