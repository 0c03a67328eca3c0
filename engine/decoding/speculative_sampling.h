// Exact verification of drafted tokens (speculative decoding): which drafts the target model
// accepts, and the token it emits after them. Greedy verification keeps the target's argmax
// choices; sampled verification is the rejection-sampling rule of Leviathan et al. 2023 ("Fast
// Inference from Transformers via Speculative Decoding") and Chen et al. 2023 ("Accelerating
// Large Language Model Decoding with Speculative Sampling"), under which every emitted token
// is distributed exactly as the target's own sampling would give it.
//
// The caller runs the target on the k+1 positions [last token, d_1, ..., d_k] in one pass; row
// i (0 <= i <= k) is the target's view of the token after the prefix and d_1..d_i. The rows
// are taken after all of the sampler's processing (repetition penalty with d_1..d_i in the
// context, constraint mask, temperature, top-k/top-p/min-p: Sampler::Distribution), so this
// file only decides; it never looks at logits.
#ifndef TEXTGEN_ENGINE_DECODING_SPECULATIVE_SAMPLING_H_
#define TEXTGEN_ENGINE_DECODING_SPECULATIVE_SAMPLING_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace textgen {

// The outcome of verifying k drafted tokens: drafts[0, accepted) are kept, then `next` follows
// them, so accepted + 1 tokens are emitted. `next` is the target's own token at the first
// rejected position, or, when all k are accepted, the bonus token from row k.
struct SpeculativeVerdict {
  int accepted = 0;
  int32_t next = -1;
};

// Greedy verification: target_ids[i] is the target's choice (argmax of its processed row i).
// Drafts are accepted while they equal the target's choice; `next` is the target's choice at
// the first mismatch (or row k). So the emitted ids are exactly those of decoding one token at
// a time, given that row i equals the one-row forward's result (batch-invariant kernels).
// InvalidArgument unless target_ids.size() == drafts.size() + 1.
absl::StatusOr<SpeculativeVerdict> VerifyGreedy(absl::Span<const int32_t> drafts,
                                                absl::Span<const int32_t> target_ids);

// Sampled verification. Distributions are [vocab] probability rows: entries finite and >= 0,
// summing to 1 within 1e-4 (InvalidArgument otherwise, naming the row).
//
// Random numbers, each one UniformDouble(rng) (engine/decoding/sampler.h), so a seeded run
// gives the same tokens with every standard library: one per checked draft, one more for the
// residual draw at a rejection, one for the bonus token. The stream therefore differs from
// non-speculative sampling's (one per token); only the distribution of the output is the same.
class SpeculativeSampler {
 public:
  // One drafted position. `p` is the target's row at this position, `q` the distribution the
  // draft was sampled from, or empty for a deterministic draft (n-gram lookup, a greedy draft
  // model: a point mass at `draft`). Accepts with probability min(1, p(draft) / q(draft));
  // otherwise `token` is drawn from normalize(max(0, p - q)) (for a point mass: p without the
  // draft). InvalidArgument for a bad row, a draft outside [0, vocab), or q(draft) == 0 (the
  // draft could not have been sampled from q).
  struct Check {
    bool accepted = false;
    int32_t token = -1;  // the draft if accepted, else the replacement
  };
  absl::StatusOr<Check> CheckDraft(absl::Span<const double> p, absl::Span<const double> q,
                                   int32_t draft, std::mt19937_64& rng);

  // A token drawn from `p` (the bonus token after k accepted drafts): inverse CDF in id order.
  absl::StatusOr<int32_t> SampleRow(absl::Span<const double> p, std::mt19937_64& rng);

  // Every position at once: p = [(k+1) * vocab] target rows, q = [k * vocab] draft rows or empty
  // (point masses). Stops at the first rejection, so later rows are neither read nor checked.
  // InvalidArgument for sizes that do not match, or as above.
  absl::StatusOr<SpeculativeVerdict> Verify(absl::Span<const int32_t> drafts,
                                            absl::Span<const double> p, absl::Span<const double> q,
                                            int vocab, std::mt19937_64& rng);

 private:
  std::vector<double> residual_;  // [vocab] max(0, p - q), reused between calls
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SPECULATIVE_SAMPLING_H_
