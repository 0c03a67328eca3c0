// oneDNN matmul primitive behind Linear, for batches of rows and big weights.
//
// One primitive per weight matrix, created at load time with a run-time row count
// (DNNL_RUNTIME_DIM_VAL), so any n reuses it. oneDNN reads F32 (kF32) and BF16 (kBf16) weights
// in place; weights of another type (F16 or Q8_0, or BF16 under kF32) are widened per call in
// tiles of rows sized to stay in L2 ("chunked"): each thread widens a tile into its own buffer
// and runs a tile-sized primitive on it (oneDNN runs single-threaded inside the parallel
// region), so the widened copy never travels to memory. Bound: compute at n >= ~32 (AMX BF16
// on this CPU); the widening costs one pass over the stored weights per call, which a prefill
// chunk of 128+ rows amortizes. Measured alternative: primitives for fixed n
// with oneDNN's blocked weight layout are ~10-25% faster at n = 128 on medium shapes, but need
// one primitive (and padding) per row-count bucket and a reordered copy of the weights.
//
// Concurrency: primitives are created with the user scratchpad mode and each call takes its
// scratchpad and stream from thread-local storage, so concurrent Run calls need no lock. (The
// default library scratchpad of this oneDNN build is shared by all primitives and only safe
// when a primitive runs on the thread that created it.)
#ifndef TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_

#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

class OneDnnMatmul final : public MatmulKernel {
 public:
  // Keeps the view (w.data must outlive the object). kF32 computes in F32, kBf16 in BF16 with
  // F32 accumulation. dnnl::error becomes Internal (Unimplemented when oneDNN has no
  // implementation for this CPU).
  static absl::StatusOr<std::unique_ptr<OneDnnMatmul>> Create(const WeightView& w,
                                                              LinearCompute compute);

  absl::Status Run(const float* x, int64_t n, float* y) const override;
  std::string Name() const override { return name_; }

 private:
  OneDnnMatmul() = default;

  struct Prim {
    dnnl::matmul matmul;
    size_t scratchpad_bytes = 0;
  };
  absl::StatusOr<Prim> MakePrim(int64_t n_cols, int64_t ldy);  // sets name_ once
  absl::Status Execute(const Prim& p, const void* src, int64_t n, const void* wei, int64_t cols,
                       float* y) const;
  absl::Status RunChunked(const void* src, int64_t n, float* y) const;

  WeightView w_;
  LinearCompute compute_ = LinearCompute::kF32;
  bool chunked_ = false;
  int64_t chunk_rows_ = 0;  // chunked: rows of W per tile
  Prim whole_;              // not chunked: all of W
  Prim chunk_;              // chunked: chunk_rows_ rows of W, y rows `out` apart
  Prim tail_;               // chunked: the last out % chunk_rows_ rows, if any
  std::string name_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_ONEDNN_MATMUL_H_
