// Linear: the matmul front end of the forward pass, y[n, out] = x[n, in] · Wᵀ.
//
// W [out, in] is read at its stored type (F32, F16, BF16 or Q8_0, see weight.h); with
// LinearCompute::kBf16, F32 and F16 weights are converted once to BF16 at Create. Prepared once
// at load time; Forward then serves any row count n >= 1 (decode tokens of many sequences plus
// prefill chunks) without creating oneDNN primitives. Per call it picks:
//   - with options.batch_invariant (the default): GemvMatmul for every n, cache-blocked for
//     many rows, so a row's result depends on that row alone (engine/ops/gemv_blocking.h);
//   - otherwise GemvMatmul for n <= gemv_max_rows (decode: memory-bound, each weight streamed
//     once) and OneDnnMatmul above (prefill: compute-bound; weights oneDNN cannot read are
//     widened tile by tile in L2), whose reduction order depends on n.
// Exception: with kBf16 on a CPU with AMX, BF16 weights go to AmxBf16Matmul for every n (each
// row's C tile accumulates the same K tiles in the same order whatever n: batch-invariant by
// construction, though untested on the machines this was written on, which lack AMX).
//
// Thread safety: Forward is const and may be called concurrently from any threads.
#ifndef TEXTGEN_ENGINE_OPS_LINEAR_H_
#define TEXTGEN_ENGINE_OPS_LINEAR_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ops/linear_options.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

class Linear {
 public:
  // Keeps w.data (which must outlive the Linear) unless options.copy_weights or a kBf16
  // conversion makes an owned copy. InvalidArgument for null data, out/in < 1, Q8_0 rows not a
  // multiple of 32; Internal/Unimplemented when oneDNN cannot build the primitive.
  static absl::StatusOr<std::unique_ptr<Linear>> Create(const WeightView& w,
                                                        const LinearOptions& options = {});
  // F32 weights w [out, in].
  static absl::StatusOr<std::unique_ptr<Linear>> Create(const float* w, int64_t out, int64_t in,
                                                        const LinearOptions& options = {});

  // x [n, in] -> y [n, out], n >= 1; x and y must not overlap. InvalidArgument on bad
  // arguments, Internal if oneDNN fails.
  absl::Status Forward(const float* x, int64_t n, float* y) const;

  int64_t out_features() const { return w_.out; }
  int64_t in_features() const { return w_.in; }
  const LinearOptions& options() const { return options_; }
  // The weights as prepared (after any conversion): type and shape. data is null when the AMX
  // kernel holds them in its packed layout.
  const WeightView& weights() const { return w_; }
  // Bytes one call streams: the prepared weights, or their packed copy (with tile padding).
  size_t streamed_bytes() const { return streamed_bytes_; }
  // Name of the kernel Forward would use for n rows, e.g. "gemv:q8_0:q8_0" (GemvMatmul::Name).
  std::string KernelName(int64_t n) const;

 private:
  explicit Linear(const LinearOptions& options) : options_(options) {}
  const MatmulKernel& Pick(int64_t n) const;

  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };

  LinearOptions options_;
  WeightView w_;
  std::unique_ptr<uint8_t, FreeDeleter> owned_;  // copied or converted weights, 64-byte aligned
  size_t streamed_bytes_ = 0;
  std::unique_ptr<MatmulKernel> amx_;   // kBf16 on AMX CPUs: serves every n
  std::unique_ptr<MatmulKernel> gemv_;  // null with kernel == kOneDnn
  // Many rows: oneDNN or WidenAmxMatmul; null with kGemv and with batch-invariant kAuto.
  std::unique_ptr<MatmulKernel> onednn_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_LINEAR_H_
