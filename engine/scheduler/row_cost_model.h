// What a forward pass of n rows costs against a one-row pass, measured: adaptive speculation
// (DraftLength) weighs k drafts by the cost of a (k+1)-row pass. It depends on the model, the
// kernels, the CPU and its load, and it is not a line: a kernel tile serves up to 4 rows (AVX2
// F32), so 2-4 rows cost little more than 1 and a 5th starts a second tile; a model whose
// weights fit in cache is bound by arithmetic, so every row costs about as much as the first.
// So the scheduler keeps each pass size's mean time (older passes weighing less, kDecay per
// pass of that size, so the figures follow the machine's load); a size not seen yet is read
// off a least-squares line through all passes.
#ifndef TEXTGEN_ENGINE_SCHEDULER_ROW_COST_MODEL_H_
#define TEXTGEN_ENGINE_SCHEDULER_ROW_COST_MODEL_H_

#include <array>

#include "engine/decoding/draft_length.h"

namespace textgen {

// Not thread-safe: the scheduler thread's.
class RowCostModel {
 public:
  // Passes larger than this are prompt chunks, which say nothing about drafts.
  static constexpr int kMaxRows = kMaxSpeculativeTokens + 1;
  static constexpr double kDecay = 0.95;
  // Passes of a size before its own mean is used.
  static constexpr double kMinWeight = 3;

  // One pass over `rows` rows took `seconds`.
  void Add(int rows, double seconds);
  // costs[k]: a pass of 1 + k rows against one of 1 row (costs[0] = 1). All 1 (drafts are
  // free) until passes of 1 row and of more have been seen.
  DraftCosts Costs() const;

 private:
  // Per size n (index n): decayed count and sum of times.
  std::array<double, kMaxRows + 1> weight_{}, sum_{};
  // Over all sizes, for the line: decayed weight, rows, rows^2, time, rows * time.
  double w_ = 0, n_ = 0, nn_ = 0, t_ = 0, nt_ = 0;

  // The mean time of an n-row pass, its own or the line's; <= 0 when unknown.
  double Seconds(int n) const;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_ROW_COST_MODEL_H_
