// The most likely alternatives at one generation step (the API's top_logprobs).
#ifndef TEXTGEN_ENGINE_DECODING_TOP_LOGPROBS_H_
#define TEXTGEN_ENGINE_DECODING_TOP_LOGPROBS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace textgen {

struct TokenLogprob {
  int32_t id;
  double logprob;
};

// The n most likely tokens of logprobs [vocab] (n <= 20), best first, ties -> lower id.
// Returns min(n, vocab) entries (none for n <= 0); NaN entries are never chosen, so fewer come
// back when the rest are NaN. One pass, O(vocab) for small n.
std::vector<TokenLogprob> TopLogprobs(absl::Span<const double> logprobs, int n);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_TOP_LOGPROBS_H_
