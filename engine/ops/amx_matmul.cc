#include "engine/ops/amx_matmul.h"

#include <sys/mman.h>

#include "absl/strings/str_cat.h"
#include "engine/ops/amx_tiles.h"
#include "engine/ops/kernel_table.h"

namespace textgen::ops {
namespace {

// The chosen kernel level's AMX functions, or null when it has none (CPU, kernel permission,
// TEXTGEN_MAX_ISA or a build without the amx level).
const KernelTable* AmxKernels() {
  const KernelTable& k = internal::Kernels();
  return k.amx_run != nullptr ? &k : nullptr;
}

}  // namespace

bool AmxBf16Matmul::Available() { return AmxKernels() != nullptr; }

size_t AmxBf16Matmul::packed_bytes() const {
  return static_cast<size_t>(out_blocks_ * k_blocks_ * kBlockOut * kBlockIn) * sizeof(uint16_t);
}

absl::StatusOr<std::unique_ptr<AmxBf16Matmul>> AmxBf16Matmul::Create(const WeightView& w,
                                                                     int64_t parallel_min_bytes) {
  if (w.data == nullptr) return absl::InvalidArgumentError("AmxBf16Matmul: null weights");
  if (w.out < 1 || w.in < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AmxBf16Matmul: bad shape [", w.out, ", ", w.in, "]"));
  }
  if (w.type != WeightType::kBf16) {
    return absl::InvalidArgumentError(
        absl::StrCat("AmxBf16Matmul: weights are ", WeightTypeName(w.type), ", not bf16"));
  }
  const KernelTable* kernels = AmxKernels();
  if (kernels == nullptr) {
    return absl::FailedPreconditionError(
        "AmxBf16Matmul: AMX-BF16 is not available (CPU, kernel permission or TEXTGEN_MAX_ISA)");
  }
  auto m = std::unique_ptr<AmxBf16Matmul>(new AmxBf16Matmul());
  m->kernels_ = kernels;
  m->out_ = w.out;
  m->in_ = w.in;
  m->out_blocks_ = (w.out + kBlockOut - 1) / kBlockOut;
  m->k_blocks_ = (w.in + kBlockIn - 1) / kBlockIn;
  m->parallel_min_bytes_ = parallel_min_bytes;
  const size_t bytes = m->packed_bytes();  // a multiple of 1 KiB, as aligned_alloc requires
  // Large buffers 2 MiB-aligned and advised as transparent huge pages: every call streams the
  // whole buffer, and with 4 KiB pages each 4 KiB of it costs a TLB miss.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t alloc = (bytes + align - 1) / align * align;
  m->packed_.reset(static_cast<uint16_t*>(std::aligned_alloc(align, alloc)));
  if (m->packed_ != nullptr && align == kHuge) madvise(m->packed_.get(), alloc, MADV_HUGEPAGE);
  if (m->packed_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("AmxBf16Matmul: cannot allocate ", bytes, " bytes"));
  }
  kernels->amx_pack_weights(static_cast<const uint16_t*>(w.data), w.out, w.in, m->k_blocks_,
                            m->out_blocks_, m->packed_.get());
  return m;
}

absl::Status AmxBf16Matmul::Run(const float* x, int64_t n, float* y) const {
  const AmxPackedWeights p{packed_.get(),      out_,      in_,
                           out_blocks_,        k_blocks_, static_cast<int64_t>(packed_bytes()),
                           parallel_min_bytes_};
  kernels_->amx_run(p, x, n, y);
  return absl::OkStatus();
}

absl::Status AmxBf16Matmul::RunWidened(const WeightView& w, int64_t tile_rows, const float* x,
                                       int64_t n, float* y) {
  const KernelTable* kernels = AmxKernels();
  if (kernels == nullptr) return absl::FailedPreconditionError("AmxBf16Matmul: no AMX");
  kernels->amx_run_widened(w, tile_rows, x, n, y);
  return absl::OkStatus();
}

}  // namespace textgen::ops
