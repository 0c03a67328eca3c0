#include "engine/decoding/top_logprobs.h"

#include <algorithm>
#include <cmath>

namespace textgen {

std::vector<TokenLogprob> TopLogprobs(absl::Span<const double> logprobs, int n) {
  std::vector<TokenLogprob> top;
  if (n <= 0) return top;
  const size_t want = std::min(static_cast<size_t>(n), logprobs.size());
  top.reserve(want + 1);
  // A sorted list of the best so far: most tokens lose to the current last entry with a single
  // compare, which beats a heap or partial_sort over an index array of the whole vocabulary.
  // Scanning ids upward and admitting only strictly better values gives ties to lower ids.
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const double v = logprobs[i];
    if (std::isnan(v)) continue;
    if (top.size() == want && !(v > top.back().logprob)) continue;
    auto pos = std::upper_bound(top.begin(), top.end(), v,
                                [](double x, const TokenLogprob& t) { return x > t.logprob; });
    top.insert(pos, TokenLogprob{static_cast<int32_t>(i), v});
    if (top.size() > want) top.pop_back();
  }
  return top;
}

}  // namespace textgen
