#include "engine/scheduler/row_cost_model.h"

#include <algorithm>

namespace textgen {
namespace {

// The rows' spread (weighted variance) below which the line's slope means nothing.
constexpr double kMinVariance = 0.05;
// A row never costs more than this many one-row passes in the estimate (noise).
constexpr double kMaxRowCost = 4;

}  // namespace

void RowCostModel::Add(int rows, double seconds) {
  if (rows <= 0 || rows > kMaxRows || seconds <= 0) return;
  weight_[rows] = weight_[rows] * kDecay + 1;
  sum_[rows] = sum_[rows] * kDecay + seconds;
  // The line decays more slowly: it stands in for sizes not seen lately.
  constexpr double kLineDecay = 0.99;
  const double n = rows;
  w_ = w_ * kLineDecay + 1;
  n_ = n_ * kLineDecay + n;
  nn_ = nn_ * kLineDecay + n * n;
  t_ = t_ * kLineDecay + seconds;
  nt_ = nt_ * kLineDecay + n * seconds;
}

double RowCostModel::Seconds(int n) const {
  if (weight_[n] >= kMinWeight) return sum_[n] / weight_[n];
  if (w_ < 4) return 0;
  const double mean_n = n_ / w_, mean_t = t_ / w_;
  const double variance = nn_ / w_ - mean_n * mean_n;
  if (variance <= kMinVariance) return 0;
  const double slope = (nt_ / w_ - mean_n * mean_t) / variance;
  return mean_t + slope * (n - mean_n);
}

DraftCosts RowCostModel::Costs() const {
  DraftCosts costs = FreeDraftCosts();
  const double one = Seconds(1);
  if (one <= 0) return costs;
  costs.one_row_seconds = one;
  double previous = 1;
  for (int k = 1; k <= kMaxSpeculativeTokens; ++k) {
    const double s = Seconds(1 + k);
    if (s <= 0) {  // one size seen only: drafting will show the rest
      costs.pass = FreeDraftCosts().pass;
      return costs;
    }
    // More rows never cost less than fewer (noise can say so), nor more than the cap.
    previous = std::clamp(s / one, previous, 1 + kMaxRowCost * k);
    costs.pass[k] = previous;
  }
  return costs;
}

}  // namespace textgen
