// The kernel catalogue: per weight format, what one instruction-set level runs for it.
//
// Each level's KernelTable (kernel_table.h) points at one array of FormatKernels indexed by
// WeightType, filled from one list in format_kernels.cc, the way ggml keys its kernels by type
// (its type-traits table). A matmul of few activation rows (GemvMatmul: decode, beams, batched
// decode, and every row count when Linear is batch-invariant) is a lookup: the entry of the
// weight's format for the compute mode, then its runner. The calibration (kernel_calibration.h)
// walks the same entries to time each level's candidate for a format.
#ifndef TEXTGEN_ENGINE_OPS_FORMAT_KERNELS_H_
#define TEXTGEN_ENGINE_OPS_FORMAT_KERNELS_H_

#include <array>
#include <cstdint>

#include "engine/ops/weight.h"

namespace textgen::ops {

// What a call's activations become, once per call, before the dot products.
enum class ActivationKind : uint8_t {
  kF32,        // as they are: F32 FMAs on the weights widened in registers (exact mode)
  kBf16,       // rounded to BF16, multiplied by VDPBF16PS (BF16 weights)
  kBf16InF32,  // rounded to BF16 and widened back: F32 FMAs with exact BF16 x BF16 products
  kQ8_0,       // quantized to Q8_0 blocks of 32: int8 dot products (Q8_0 weights)
  kQ8_1,       // quantized to Q8_1 blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4)
  kQ8_K,       // quantized to Q8_K blocks of 256 (the K-quants and IQ4_XS)
};

// "f32", "bf16", "bf16-in-f32", "q8_0", "q8_1", "q8_k": the last part of a GemvMatmul name.
const char* ActivationKindName(ActivationKind kind);

// y[n, w.out] = x[n, w.in] . w^T, one call: activations converted once, then the level's row
// kernel over RunGemvBlocks' ranges (gemv_blocking.h) on `threads` threads. Each output row is
// the same bytes whatever n and the thread count (batch invariance).
using FormatMatmul = void (*)(const WeightView& w, const float* x, int64_t n, float* y,
                              int threads);

struct FormatMatmulEntry {
  ActivationKind activations = ActivationKind::kF32;
  FormatMatmul run = nullptr;
};

// One format's row of the catalogue at one level.
struct FormatKernels {
  // --compute f32: F32 products, summed in the level's order (llama.cpp parity is judged here).
  FormatMatmulEntry exact;
  // --compute bf16 (the default): the format's fast form. F32 and F16 weights are converted to
  // BF16 when Linear loads them in this mode, so their entry here is their exact one.
  FormatMatmulEntry fast;
  // BF16 weights when the process multiplies BF16 in F32 FMAs (Bf16DotInF32()); else `fast`.
  FormatMatmulEntry fast_in_f32;
  // Every level's `fast` gives the same bytes for this format (one reduction order; the
  // kernels' tests check each level against the portable form), so the calibration may choose
  // among levels by speed without changing an answer.
  bool one_order = false;
};

// A level's entries, indexed by WeightType.
using FormatCatalogue = std::array<FormatKernels, kWeightTypeCount>;

// The entry of `t` in the level's table `k`.
struct KernelTable;
const FormatKernels& FormatOf(const KernelTable& k, WeightType t);

// The entry `k` runs for `t` under the compute mode (`fast`: --compute bf16) and BF16 form.
const FormatMatmulEntry& MatmulEntry(const KernelTable& k, WeightType t, bool fast,
                                     bool bf16_dot_in_f32);

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_FORMAT_KERNELS_H_
