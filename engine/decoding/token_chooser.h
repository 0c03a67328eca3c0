// How a generation chooses its tokens: one interface over greedy / sampling (SingleChooser,
// single_chooser.h) and beam search (BeamChooser, beam_chooser.h). A chooser owns everything
// that decides tokens (sampler, beam search, each sequence's output constraint, logprobs) and
// nothing of the KV cache: Generation keeps one feed per live sequence and reorders them the way
// each step's TokenChoice says.
#ifndef TEXTGEN_ENGINE_DECODING_TOKEN_CHOOSER_H_
#define TEXTGEN_ENGINE_DECODING_TOKEN_CHOOSER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/decoding/beam_search.h"
#include "engine/decoding/decoding_options.h"
#include "engine/decoding/generation_output.h"
#include "engine/decoding/token_constraint.h"

namespace textgen {

// What one choice decided.
struct TokenChoice {
  // The live sequences from now on, in order: each continues live sequence `parent` of the step
  // with `token` (several may share a parent; parents named by none are dropped). Empty when the
  // answer ended.
  std::vector<BeamChoice> next;
  // Set when this choice ended the answer, and why.
  std::optional<FinishReason> end;
};

// Not thread-safe; one per request.
class TokenChooser {
 public:
  virtual ~TokenChooser() = default;

  // One choice. `logits` [num_live, vocab]: the model's rows for the live sequences, in order
  // (1 at the start; then as many as the last choice's `next`). Must not be called once a choice
  // ended the answer or after End. Errors: an output constraint that allows no token at all
  // (FailedPrecondition), or refuses a token its own mask allowed (Internal).
  virtual absl::StatusOr<TokenChoice> Choose(const float* logits) = 0;

  // The tokens that became certain to begin the answer since the last call, `text` unset:
  // what the stream may show now.
  virtual std::vector<GeneratedToken> TakeCertain() = 0;

  // Ends the choosing, after the choice that ended the answer or early (cancelled, context
  // full). Returns the answer's tokens TakeCertain has not returned.
  virtual std::vector<GeneratedToken> End() = 0;

  // After End: the ids of the best hypothesis (empty if there is none).
  virtual std::vector<int32_t> answer_ids() const = 0;

  // After End: the hypotheses, best first. `finish` is the request's finish reason; `streamed`
  // the text the stream showed for the answer (a single sequence's text is exactly that).
  virtual std::vector<Hypothesis> Results(FinishReason finish, std::string streamed) = 0;
};

// `row` [vocab] with `constraint` applied, written to `out` [vocab]; `row` itself when there is
// no constraint. FailedPrecondition when the constraint allows no token at all.
absl::StatusOr<const float*> ApplyConstraint(const TokenConstraint* constraint, const float* row,
                                             int vocab, float* out);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_TOKEN_CHOOSER_H_
