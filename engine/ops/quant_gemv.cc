#include "engine/ops/quant_gemv.h"

#include <vector>

#include "engine/ops/quant_decode.h"
#include "engine/ops/simd.h"

namespace textgen::ops {

void GemvQuantExact(const WeightView& w, const float* x, int64_t n, float* y, int64_t ldy,
                    int64_t r0, int64_t r1) {
  // One widened row [w.in] (at most tens of KB: stays in L1/L2 while every x row uses it).
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(w.in));
  for (int64_t r = r0; r < r1; ++r) {
    DecodeRowF32(w.type, w.row(r), row.data(), w.in);
    for (int64_t i = 0; i < n; ++i) y[i * ldy + r] = simd::Dot(x + i * w.in, row.data(), w.in);
  }
}

}  // namespace textgen::ops
