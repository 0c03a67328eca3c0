// Single-threaded F32 matmul by AVX-512 dot products, for the small calls where oneDNN's
// per-call cost would dominate (decode of tiny models: (64 x 64) weights take ~0.1 us here).
#ifndef TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_

#include <cstdint>
#include <string>

#include "engine/ops/matmul_kernel.h"

namespace textgen::ops {

// y[n, out] = x[n, in] · Wᵀ for W [out, in] row-major. Any n, but it does not block for
// cache, so it is meant for n <= ~8. F32 products and accumulation (16 partial sums per dot).
void DirectMatmulF32(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y);
// As DirectMatmulF32 with rows of y ldy >= out floats apart (y [n, ldy]); used by attention
// for the scores of one cache block.
void DirectMatmulF32Strided(const float* w, int64_t out, int64_t in, const float* x, int64_t n,
                            float* y, int64_t ldy);

// MatmulKernel over caller-owned weights (Linear keeps them alive).
class DirectMatmul final : public MatmulKernel {
 public:
  // w [out, in] must outlive this object.
  DirectMatmul(const float* w, int64_t out, int64_t in) : w_(w), out_(out), in_(in) {}
  absl::Status Run(const float* x, int64_t n, float* y) const override {
    DirectMatmulF32(w_, out_, in_, x, n, y);
    return absl::OkStatus();
  }
  std::string Name() const override { return "direct:f32"; }

 private:
  const float* w_;
  int64_t out_;
  int64_t in_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_DIRECT_MATMUL_H_
