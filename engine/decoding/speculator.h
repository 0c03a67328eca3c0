// A request's draft sources for speculative decoding (SpeculationOptions): the n-gram / prompt
// lookup drafter over the prediction, the prompt and the answer so far, and the draft model's
// drafter. Generation asks it for drafts before a decode pass, runs them with the last chosen
// token as k+1 rows, chooses tokens row by row as it would without drafts, and tells it every
// chosen token. Drafts are deterministic (point masses), so choosing row by row -- the argmax,
// or a sample drawn from the target's row with the sampler's own random stream -- and keeping
// drafts while they equal the choice is the rejection-sampling rule for point-mass drafts
// (accept with probability p(draft); else a token from p without the draft), and it leaves
// every choice, random draws included, exactly what the run without drafts makes.
#ifndef TEXTGEN_ENGINE_DECODING_SPECULATOR_H_
#define TEXTGEN_ENGINE_DECODING_SPECULATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "engine/decoding/draft_length.h"
#include "engine/decoding/model_drafter.h"
#include "engine/decoding/ngram_drafter.h"
#include "engine/decoding/speculation_options.h"

namespace textgen {

// Not thread-safe; one per request.
class Speculator {
 public:
  // `draft_model` and `draft_cache` (both or neither; borrowed) serve DraftSource::kDraftModel;
  // without them such a request drafts by n-gram lookup.
  Speculator(const SpeculationOptions& options, const std::vector<int32_t>& prompt,
             CausalLm* draft_model, KvCache* draft_cache);

  // A token the request chose (drafted or not).
  void Accept(int32_t token);
  // Up to min(max_tokens, the adaptive k (DraftLength, given the passes' costs)) drafts after the
  // text so far (none when no source has one). Prediction and n-gram lookup first; the draft
  // model when they have none.
  void Propose(int max_tokens, const DraftCosts& costs, std::vector<int32_t>* out);
  // The verification pass of `drafted` drafts kept the first `accepted`.
  void Verified(int drafted, int accepted);
  // Releases the draft model's blocks (the answer is complete).
  void Release();

 private:
  DraftLength length_;
  std::optional<NgramDrafter> ngram_;    // with kNgram or a prediction
  std::unique_ptr<ModelDrafter> model_;  // with kDraftModel and a draft model
  std::vector<int32_t> text_;            // prompt + chosen tokens (the draft model's input)
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SPECULATOR_H_
