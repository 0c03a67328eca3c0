// Token sampling: repetition penalty, temperature, top-k, top-p (nucleus), min-p, and a
// seeded, implementation-independent random draw.
#ifndef TEXTGEN_ENGINE_DECODING_SAMPLER_H_
#define TEXTGEN_ENGINE_DECODING_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace textgen {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy (argmax, ties -> lowest id); must be >= 0
  // 0 = off; else keep exactly the k most likely. Ties at the k-th place go to the lower ids,
  // so k tokens are kept even when several share the boundary logit.
  int top_k = 0;
  // In (0, 1]; 1 = off. Keep the smallest prefix (by prob descending, ties -> lower id) whose
  // mass >= top_p. Masses within 1e-6 of top_p count as reaching it, so the float rounding of
  // logits does not decide exact boundaries (probs {0.5, 0.3, 0.2}, p = 0.8 keeps two).
  float top_p = 1.0f;
  float min_p = 0.0f;  // in [0, 1); 0 = off; drop tokens with p < min_p * p_max
  // > 0; 1 = off. HF/CTRL: for each distinct token already in the context (prompt +
  // generated), logit > 0 ? logit / penalty : logit * penalty.
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;  // unset = nondeterministic seed
};

// InvalidArgument naming the parameter and its allowed range, e.g.
// "top_p must be in (0, 1], got 1.5". NaNs are rejected everywhere.
absl::Status ValidateSamplingParams(const SamplingParams& p);

// In place on logits [vocab]; `context` = prompt + generated ids so far (ids outside
// [0, vocab) ignored). Each distinct id is penalized once however often it occurs.
void ApplyRepetitionPenalty(float penalty, absl::Span<const int32_t> context,
                            absl::Span<float> logits);

// Uniform double in [0, 1) from the top 53 bits of one mt19937_64 output. Spelled out because
// std::uniform_real_distribution's algorithm is implementation-defined, and seeded requests
// must give the same tokens with every standard library.
double UniformDouble(std::mt19937_64& rng);

// Per-request random generator and pipeline. Not thread-safe; one per request (so a seeded
// request gives the same tokens whatever else runs in the process).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // params must be valid

  // Chooses the next token from raw logits [vocab] (vocab >= 1; repetition penalty applied
  // first, using `context`). Order: repetition penalty, temperature (0 -> argmax and stop),
  // top-k, softmax, top-p, min-p, renormalize, draw. Deterministic for a fixed seed and inputs.
  // NaN logits count as -inf; if no logit is finite (all -inf/NaN) or one is +inf, the argmax
  // is returned, as for temperature 0. With temperature > 0 every call consumes exactly one
  // random number (whatever the logits), so the stream of draws depends only on the call count.
  int32_t Sample(absl::Span<const float> logits, absl::Span<const int32_t> context);

  // The filtered, renormalized distribution Sample would draw from (for tests): probability
  // per token id, 0 for removed ones (one-hot at the argmax for the greedy cases).
  std::vector<double> Distribution(absl::Span<const float> logits,
                                   absl::Span<const int32_t> context) const;

  const SamplingParams& params() const { return params_; }

 private:
  // Reused buffers (one Sampler per request, so Sample allocates only on its first call).
  struct Scratch {
    std::vector<float> logits;   // [vocab] after the repetition penalty
    std::vector<int32_t> ids;    // surviving candidates, ascending (the draw's canonical order)
    std::vector<float> probs;    // their unnormalized probabilities (the max token's is 1)
    std::vector<uint64_t> keys;  // (value, id) sort keys for top-k / top-p selection
  };
  // Runs the pipeline up to the draw. Returns the greedy token when the result is decided
  // without a draw (then `s.ids` is unspecified), else -1 with the candidates in `s`.
  int32_t Filter(absl::Span<const float> logits, absl::Span<const int32_t> context,
                 Scratch& s) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  Scratch scratch_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SAMPLER_H_
