// Greedy decoding and sampling: one sequence, one token per choice.
#ifndef TEXTGEN_ENGINE_DECODING_SINGLE_CHOOSER_H_
#define TEXTGEN_ENGINE_DECODING_SINGLE_CHOOSER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/decoding/decoding_options.h"
#include "engine/decoding/sampler.h"
#include "engine/decoding/token_chooser.h"
#include "engine/decoding/token_constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

// Each choice: the model's log-softmax (for logprobs and top_logprobs), the output constraint's
// mask, then the Sampler (kSample with temperature > 0) or the argmax after the repetition
// penalty. The chosen token is certain at once. The answer ends on an end-of-generation token
// (unless ignore_eos), a complete constraint, or max_new_tokens; a stop string ends it too, but
// that is the stream's to see (StreamAssembler::stopped), so the caller decides it.
class SingleChooser : public TokenChooser {
 public:
  // `options` must be valid (ValidateDecodingOptions); `prompt`: the repetition penalty's
  // context before the first choice; `constraint` (may be null): the sequence's output
  // constraint. Borrows the tokenizer, which must outlive it.
  SingleChooser(const Tokenizer& tokenizer, const DecodingOptions& options, int vocab,
                std::vector<int32_t> prompt, std::unique_ptr<TokenConstraint> constraint);

  absl::StatusOr<TokenChoice> Choose(const float* logits) override;
  std::vector<GeneratedToken> TakeCertain() override;
  std::vector<GeneratedToken> End() override;
  std::vector<int32_t> answer_ids() const override { return ids_; }
  std::vector<Hypothesis> Results(FinishReason finish, std::string streamed) override;

 private:
  // The token for `logits` [vocab] (constrained already).
  int32_t Pick(const float* logits);
  // Why the answer ends after `id`, if it does (the stop strings aside).
  std::optional<FinishReason> EndAfter(int32_t id) const;

  const Tokenizer& tok_;
  const int vocab_;
  const int max_new_tokens_;
  const int top_logprobs_;
  const bool ignore_eos_;
  const float repetition_penalty_;
  std::optional<Sampler> sampler_;  // unset: greedy
  std::unique_ptr<TokenConstraint> constraint_;
  std::vector<int32_t> context_;         // prompt + ids_: the repetition penalty's context
  std::vector<int32_t> ids_;             // generated
  std::vector<double> logprobs_;         // per generated id
  std::vector<GeneratedToken> certain_;  // chosen, not yet taken
  std::vector<double> row_logprobs_;     // [vocab] scratch: the row's log-softmax
  std::vector<float> processed_;         // [vocab] scratch: the row after the penalty
  std::vector<float> masked_;            // [vocab] scratch: the row after the constraint
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SINGLE_CHOOSER_H_
