#include "engine/decoding/draft_length.h"

#include <algorithm>
#include <cmath>

namespace textgen {
namespace {

// The prior, the sums' starting point: as if 3 of 4 tried drafts had been accepted, so that a
// new request drafts unless rows are costly. It decays with the passes like any other.
constexpr double kPriorAccepted = 3;
constexpr double kPriorTried = 4;
// Each pass's weight against the ones before: the estimate follows the last ~10 passes, as the
// text moves in and out of repeated stretches.
constexpr double kDecay = 0.9;

}  // namespace

DraftLength::DraftLength(int max_tokens, bool adaptive)
    : max_tokens_(std::max(0, max_tokens)),
      adaptive_(adaptive),
      accepted_(kPriorAccepted),
      tried_(kPriorTried) {}

double DraftLength::acceptance() const {
  // Never exactly 0 or 1: E(k) stays finite and every k keeps a chance.
  return std::clamp(accepted_ / tried_, 1e-3, 1 - 1e-3);
}

DraftCosts FreeDraftCosts() {
  DraftCosts c;
  c.pass.fill(1);
  return c;
}

int DraftLength::Best(double a, const DraftCosts& costs, int max_tokens, double draft_cost) {
  int best = 0;
  double best_rate = 1;  // no drafts: one token per one-row pass
  double tokens = 1, p = 1;
  max_tokens = std::min(max_tokens, kMaxSpeculativeTokens);
  for (int k = 1; k <= max_tokens; ++k) {
    p *= a;
    tokens += p;
    const double rate = tokens / (std::max(1.0, costs.pass[k]) + k * std::max(0.0, draft_cost));
    // Ties go to fewer drafts: the same speed for less work.
    if (rate > best_rate * (1 + 1e-9)) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

int DraftLength::Next(const DraftCosts& costs) {
  if (!adaptive_) return max_tokens_;
  double draft_cost = 0;
  if (draft_tokens_ > 0 && costs.one_row_seconds > 0) {
    draft_cost = draft_seconds_ / draft_tokens_ / costs.one_row_seconds;
  }
  const int k = Best(acceptance(), costs, max_tokens_, draft_cost);
  if (k > 0) {
    probe_interval_ = kProbeInterval;
    return k;
  }
  // No probe when even drafts that are always accepted would not pay (a draft model as dear as
  // the target): a probe could only confirm it, at the price of the drafter's catch-up.
  if (since_draft_ < probe_interval_ || Best(1 - 1e-3, costs, max_tokens_, draft_cost) == 0) {
    return 0;
  }
  probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  return std::min(1, max_tokens_);
}

void DraftLength::Verified(int drafted, int accepted) {
  since_draft_ = 0;
  if (drafted <= 0) return;
  accepted = std::clamp(accepted, 0, drafted);
  accepted_ = accepted_ * kDecay + accepted;
  tried_ = tried_ * kDecay + accepted + (accepted < drafted ? 1 : 0);
}

void DraftLength::ChoseWithoutDrafts() { ++since_draft_; }

void DraftLength::Drafted(int tokens, double seconds) {
  if (tokens <= 0 || seconds < 0) return;
  draft_seconds_ = draft_seconds_ * kDecay + seconds;
  draft_tokens_ = draft_tokens_ * kDecay + tokens;
}

}  // namespace textgen
