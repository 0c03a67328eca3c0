#include "engine/decoding/speculative_sampling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/sampler.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr double kSumTolerance = 1e-4;

// OK if `row` is a probability distribution over `vocab` ids.
absl::Status CheckRow(absl::Span<const double> row, size_t vocab, const char* what) {
  if (row.size() != vocab || vocab == 0) {
    return absl::InvalidArgumentError(absl::StrCat("speculative sampling: the ", what, " has ",
                                                   row.size(), " entries, expected ", vocab));
  }
  double sum = 0;
  for (double x : row) {
    if (!(x >= 0 && std::isfinite(x))) {
      return absl::InvalidArgumentError(absl::StrCat("speculative sampling: the ", what,
                                                     " holds a negative or non-finite entry"));
    }
    sum += x;
  }
  if (std::abs(sum - 1.0) > kSumTolerance) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative sampling: the ", what, " sums to ", sum, ", not 1"));
  }
  return absl::OkStatus();
}

// Draws an id with probability w[id] / sum(w): inverse CDF in id order with one uniform.
// Ids of weight 0 are never drawn; sum(w) must be > 0.
int32_t DrawWeighted(absl::Span<const double> w, std::mt19937_64& rng) {
  double total = 0;
  for (double x : w) total += x;
  const double target = UniformDouble(rng) * total;
  double cum = 0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    cum += w[i];
    last_positive = static_cast<int32_t>(i);
    if (target < cum) return last_positive;
  }
  return last_positive;  // the running sum rounded below the total
}

}  // namespace

absl::StatusOr<SpeculativeVerdict> VerifyGreedy(absl::Span<const int32_t> drafts,
                                                absl::Span<const int32_t> target_ids) {
  if (target_ids.size() != drafts.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat("greedy verification of ", drafts.size(),
                                                   " drafted tokens needs ", drafts.size() + 1,
                                                   " target rows, got ", target_ids.size()));
  }
  SpeculativeVerdict v;
  while (static_cast<size_t>(v.accepted) < drafts.size() &&
         drafts[v.accepted] == target_ids[v.accepted]) {
    ++v.accepted;
  }
  v.next = target_ids[v.accepted];
  return v;
}

absl::StatusOr<SpeculativeSampler::Check> SpeculativeSampler::CheckDraft(absl::Span<const double> p,
                                                                         absl::Span<const double> q,
                                                                         int32_t draft,
                                                                         std::mt19937_64& rng) {
  TG_RETURN_IF_ERROR(CheckRow(p, p.size(), "target row"));
  if (!q.empty()) TG_RETURN_IF_ERROR(CheckRow(q, p.size(), "draft row"));
  if (draft < 0 || static_cast<size_t>(draft) >= p.size()) {
    return absl::InvalidArgumentError(absl::StrCat("speculative sampling: drafted token ", draft,
                                                   " is outside the vocabulary [0, ", p.size(),
                                                   ")"));
  }
  const double qx = q.empty() ? 1.0 : q[draft];
  if (qx <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative sampling: drafted token ", draft,
                     " has probability 0 under the draft distribution it was sampled from"));
  }
  // Accept with probability min(1, p(x) / q(x)): u * q(x) < p(x) for u uniform in [0, 1).
  if (UniformDouble(rng) * qx < p[draft]) return Check{true, draft};
  // Rejected, so p(x) < q(x) and the residual has mass >= q(x) - p(x) > 0.
  residual_.resize(p.size());
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double qi = q.empty() ? (static_cast<int32_t>(i) == draft ? 1.0 : 0.0) : q[i];
    residual_[i] = std::max(0.0, p[i] - qi);
    mass += residual_[i];
  }
  // Only rows that are normalized merely within the tolerance can leave no residual mass; then
  // the target row itself is the best available answer.
  const absl::Span<const double> from = mass > 0 ? absl::Span<const double>(residual_) : p;
  return Check{false, DrawWeighted(from, rng)};
}

absl::StatusOr<int32_t> SpeculativeSampler::SampleRow(absl::Span<const double> p,
                                                      std::mt19937_64& rng) {
  TG_RETURN_IF_ERROR(CheckRow(p, p.size(), "target row"));
  return DrawWeighted(p, rng);
}

absl::StatusOr<SpeculativeVerdict> SpeculativeSampler::Verify(absl::Span<const int32_t> drafts,
                                                              absl::Span<const double> p,
                                                              absl::Span<const double> q, int vocab,
                                                              std::mt19937_64& rng) {
  const size_t k = drafts.size();
  const size_t v = vocab > 0 ? static_cast<size_t>(vocab) : 0;
  if (v == 0 || p.size() != (k + 1) * v || (!q.empty() && q.size() != k * v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative sampling of ", k, " drafted tokens over a vocabulary of ", vocab,
                     " needs ", k + 1, " target rows and ", k, " draft rows (or none), got ",
                     p.size(), " and ", q.size(), " probabilities"));
  }
  SpeculativeVerdict verdict;
  for (size_t i = 0; i < k; ++i) {
    const absl::Span<const double> qi = q.empty() ? q : q.subspan(i * v, v);
    TG_ASSIGN_OR_RETURN(const Check c, CheckDraft(p.subspan(i * v, v), qi, drafts[i], rng));
    if (!c.accepted) {
      verdict.next = c.token;
      return verdict;
    }
    ++verdict.accepted;
  }
  TG_ASSIGN_OR_RETURN(verdict.next, SampleRow(p.subspan(k * v, v), rng));
  return verdict;
}

}  // namespace textgen
