// AMX BF16 matmul for BF16 weights (LinearCompute::kBf16), one kernel for every row count:
// decode batches (memory-bound: each weight byte is read from DRAM once per call, whatever n)
// and prefill chunks (compute-bound: one TDPBF16PS multiplies a 16x32 BF16 tile of activations
// by a 32x16 tile of weights, 8192 multiply-adds, in ~5 ns on this CPU).
//
// Why a kernel of our own: oneDNN 2.6 with a run-time row count picks "gemm:jit:bf16" (no
// AMX), and the AVX512-BF16 GEMV turns compute-bound at 4 rows; with AMX a 16-row decode step
// costs about what one row does, the weight stream (tests/bench/amx_bench.cc).
//
// Weights are packed once, at Create, into the layout TDPBF16PS reads as its B operand (see
// AmxBf16Matmul::packed_); activations are rounded to BF16 per call (round to nearest even, as
// ToBf16Activations), the products accumulate in F32. Results equal the exact products of the
// BF16 values up to F32 accumulation rounding (~1e-6 of the sum of |products|).
//
// Work split: output blocks (16 rows of W) in pairs, 2 blocks x 2 groups of 16 activation rows
// per step (4 C tiles, all 8 tile registers). Known limit: prefill reaches ~40% of the AMX peak
// (12-15 ns per tile product per core against ~5.5); each block pair ends with TILESTORED of
// its C tiles, which waits for the tile pipeline to drain, and the restart from L2 is slow.
// Software prefetch, k-chunking, row-chunking and 1x2 blocks with double-buffered C were
// measured and did not help.
//
// Linux grants the 8 KiB tile state only on request: the kernel selection (kernel_dispatch.cc)
// makes it (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) before choosing the amx level.
// The tile loops are in amx_tiles.cc, compiled at the amx level only.
#ifndef TEXTGEN_ENGINE_OPS_AMX_MATMUL_H_
#define TEXTGEN_ENGINE_OPS_AMX_MATMUL_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/ops/matmul_kernel.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

struct KernelTable;

class AmxBf16Matmul final : public MatmulKernel {
 public:
  // Output rows per packed block (the N of one tile) and values of `in` per tile (its K).
  static constexpr int64_t kBlockOut = 16;
  static constexpr int64_t kBlockIn = 32;

  // True when the chosen kernel level is amx: the CPU has AMX-TILE and AMX-BF16, the kernel
  // granted this process the tile state and TEXTGEN_MAX_ISA allows it. Thread-safe.
  static bool Available();

  // Packs w (kBf16 [out, in], row-major) into a buffer of its own; w may be freed afterwards.
  // Calls with at least `parallel_min_bytes` of packed weights, or enough arithmetic to pay
  // for a fork/join, split the output blocks across NumThreads() threads.
  // InvalidArgument: null data, a shape below [1, 1], a type other than kBf16.
  // FailedPrecondition: !Available(). ResourceExhausted: the packed buffer cannot be allocated.
  static absl::StatusOr<std::unique_ptr<AmxBf16Matmul>> Create(
      const WeightView& w, int64_t parallel_min_bytes = int64_t{256} << 10);

  // y [n, out] = x [n, in] · Wᵀ, x rounded to BF16 first. Every weight is read once per call
  // for any n (groups of 16 activation rows loop inside a block of 16 output rows, so the
  // block stays in L1/L2). Thread-safe (per-thread scratch); never fails.
  absl::Status Run(const float* x, int64_t n, float* y) const override;
  std::string Name() const override { return "amx:bf16"; }

  // y [n, out] = x · Wᵀ for weights AMX cannot read as stored (e.g. Q8_0): x is packed once,
  // then each thread widens `tile_rows` rows at a time (a multiple of 32) to BF16, packs them
  // into AMX tiles in L2 and runs them, so the stored weights are read once per call.
  static absl::Status RunWidened(const WeightView& w, int64_t tile_rows, const float* x, int64_t n,
                                 float* y);

  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }
  // Bytes streamed per call: the packed weights, padding included.
  size_t packed_bytes() const;

 private:
  AmxBf16Matmul() = default;

  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };

  const KernelTable* kernels_ = nullptr;  // the amx level's
  int64_t out_ = 0;
  int64_t in_ = 0;
  int64_t out_blocks_ = 0;  // ceil(out / kBlockOut)
  int64_t k_blocks_ = 0;    // ceil(in / kBlockIn)
  int64_t parallel_min_bytes_ = 0;
  // [out_blocks_, k_blocks_, 16, 16, 2] BF16, 64-byte aligned: tile (ob, kb) is 1 KiB, element
  // [ob][kb][p][j][e] = W[ob * 16 + j][kb * 32 + 2 * p + e] (zero past out or in). Row p of a
  // tile holds the k pair (2p, 2p + 1) of each of the 16 outputs, which is how TDPBF16PS reads
  // B; a block's tiles are consecutive along k, so one block is one sequential stream.
  std::unique_ptr<uint16_t, FreeDeleter> packed_;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_AMX_MATMUL_H_
