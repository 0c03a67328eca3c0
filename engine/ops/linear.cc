#include "engine/ops/linear.h"

#include <sys/mman.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/ops/amx_matmul.h"
#include "engine/ops/gemv_matmul.h"
#include "engine/ops/onednn_matmul.h"
#include "engine/ops/weight_convert.h"
#include "engine/ops/widen_amx_matmul.h"
#include "engine/util/status_macros.h"

namespace textgen::ops {

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(const float* w, int64_t out, int64_t in,
                                                       const LinearOptions& options) {
  return Create(WeightView{WeightType::kF32, w, out, in}, options);
}

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(const WeightView& w,
                                                       const LinearOptions& options) {
  if (w.data == nullptr) return absl::InvalidArgumentError("Linear: null weights");
  if (w.out < 1 || w.in < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: bad shape [", w.out, ", ", w.in, "]"));
  }
  if (w.in % WeightBlockSize(w.type) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: ", WeightTypeName(w.type), " rows of ",
                                                   w.in, " values are not whole ",
                                                   WeightBlockSize(w.type), "-value blocks"));
  }
  auto linear = std::unique_ptr<Linear>(new Linear(options));
  linear->w_ = w;
  const bool to_bf16 = options.compute == LinearCompute::kBf16 &&
                       (w.type == WeightType::kF32 || w.type == WeightType::kF16);
  if (to_bf16 || options.copy_weights) {
    WeightView owned = w;
    if (to_bf16) owned.type = WeightType::kBf16;
    // Large copies 2 MiB-aligned and advised as transparent huge pages: a decode step streams
    // the whole buffer, and with 4 KiB pages every 4 KiB costs a TLB miss (measured on the AMX
    // kernel's packed copy, which does the same: stories110M decode 9.1 -> 7.1 ms per token).
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t align = owned.bytes() >= kHuge ? kHuge : 64;
    const size_t bytes = (owned.bytes() + align - 1) / align * align;
    linear->owned_.reset(static_cast<uint8_t*>(std::aligned_alloc(align, bytes)));
    if (linear->owned_ != nullptr && align == kHuge) {
      madvise(linear->owned_.get(), bytes, MADV_HUGEPAGE);
    }
    if (linear->owned_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Linear: cannot allocate ", bytes, " bytes"));
    }
    if (to_bf16) {
      ConvertRowsBf16(w, 0, w.out, reinterpret_cast<uint16_t*>(linear->owned_.get()));
    } else {
      std::memcpy(linear->owned_.get(), w.data, w.bytes());
    }
    owned.data = linear->owned_.get();
    linear->w_ = owned;
  }
  if (options.compute == LinearCompute::kBf16 && linear->w_.type == WeightType::kBf16 &&
      options.kernel == LinearKernel::kAuto && AmxBf16Matmul::Available()) {
    // AMX serves every row count from its own packed copy, reading the weights once per call:
    // decode batches of 1..16 rows cost about one weight stream, and prefill gets tile
    // throughput (measured: tests/bench/amx_bench.cc). The row-major copy is then dropped.
    TG_ASSIGN_OR_RETURN(std::unique_ptr<AmxBf16Matmul> amx,
                        AmxBf16Matmul::Create(linear->w_, options.parallel_min_bytes));
    linear->streamed_bytes_ = amx->packed_bytes();
    linear->amx_ = std::move(amx);
    linear->owned_.reset();
    linear->w_.data = nullptr;
    return linear;
  }
  linear->streamed_bytes_ = linear->w_.bytes();
  if (options.kernel != LinearKernel::kOneDnn) {
    linear->gemv_ =
        std::make_unique<GemvMatmul>(linear->w_, options.compute, options.parallel_min_bytes);
  }
  // Batch-invariant kAuto serves every n with the GEMV kernels: no oneDNN primitive needed.
  const bool many_rows_kernel = options.kernel == LinearKernel::kOneDnn ||
                                (options.kernel == LinearKernel::kAuto && !options.batch_invariant);
  if (many_rows_kernel) {
    if (options.compute == LinearCompute::kBf16 && options.kernel == LinearKernel::kAuto &&
        AmxBf16Matmul::Available()) {
      // Weights AMX cannot stream as stored (Q8_0): widened per L2 tile for many-row calls.
      TG_ASSIGN_OR_RETURN(linear->onednn_, WidenAmxMatmul::Create(linear->w_));
    } else {
      absl::StatusOr<std::unique_ptr<OneDnnMatmul>> onednn =
          OneDnnMatmul::Create(linear->w_, options.compute);
      if (!onednn.ok() && absl::IsUnimplemented(onednn.status()) &&
          options.compute == LinearCompute::kBf16) {
        // oneDNN has no BF16 matmul on CPUs without AVX-512 (the portable image on an AVX2
        // host): many-row calls then widen the weight tiles to F32 and multiply in F32, which
        // only adds precision; the few-row kernels and the weights in memory stay as they are.
        onednn = OneDnnMatmul::Create(linear->w_, LinearCompute::kF32);
      }
      TG_ASSIGN_OR_RETURN(linear->onednn_, std::move(onednn));
    }
  }
  return linear;
}

const MatmulKernel& Linear::Pick(int64_t n) const {
  if (amx_ != nullptr) return *amx_;
  if (gemv_ == nullptr) return *onednn_;
  if (onednn_ == nullptr) return *gemv_;
  return n <= options_.gemv_max_rows ? *gemv_ : *onednn_;
}

absl::Status Linear::Forward(const float* x, int64_t n, float* y) const {
  if (x == nullptr || y == nullptr) return absl::InvalidArgumentError("Linear: null buffer");
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("Linear: n = ", n, " < 1"));
  return Pick(n).Run(x, n, y);
}

std::string Linear::KernelName(int64_t n) const { return Pick(n).Name(); }

}  // namespace textgen::ops
