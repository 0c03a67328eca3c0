// Options of Linear (engine/ops/linear.h), kept apart so kernels can see them without the
// front end.
#ifndef TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_
#define TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_

#include <cstdint>

namespace textgen::ops {

// Arithmetic of the product. Inputs and outputs are F32 in every mode; weights keep their
// stored type unless said otherwise.
enum class LinearCompute : uint8_t {
  // Exact: every weight is widened to F32 and multiplied with F32 activations, F32 sums; agrees
  // with a double reference to ~1e-6 relative. For parity work against other engines.
  kF32,
  // Fast: F32 and F16 weights are converted once, at Create, to BF16 (half the bytes streamed
  // per decode step for F32; F16 -> BF16 loses 3 mantissa bits); BF16 stays. Many-row products
  // (prefill) round activations to BF16 and run oneDNN's BF16 matmul (AMX on this CPU); few-row
  // products (decode) multiply BF16 weights with F32 activations. Q8_0 weights stay Q8_0: few
  // rows quantize the activations to Q8_0 blocks and use int8 VNNI dot products (llama.cpp's
  // arithmetic), many rows widen weight tiles to BF16 on the fly. ~3 significant digits.
  kBf16,
};

// Which kernel serves a call. kAuto picks per call from the number of rows (see Linear).
enum class LinearKernel : uint8_t {
  kAuto,
  kOneDnn,  // oneDNN matmul (weights widened tile by tile when oneDNN cannot read them)
  kGemv,    // row-streaming kernels of engine/ops (few rows: each weight read once per call)
};

struct LinearOptions {
  LinearCompute compute = LinearCompute::kF32;
  LinearKernel kernel = LinearKernel::kAuto;
  // false: Linear keeps a pointer to the caller's weights (e.g. an mmapped tensor), which must
  // outlive it. true: Linear copies them, so the caller may free a temporary buffer. A
  // conversion (kBf16 of F32/F16 weights) always owns its result.
  bool copy_weights = false;
  // kAuto: calls with n <= gemv_max_rows use the GEMV kernels, the rest oneDNN. Why: with few
  // rows a matmul is a stream over the weights (memory-bound), and the GEMV kernels read each
  // weight once for up to 4 rows with no per-call cost, while oneDNN's M=1 path ran at a third
  // of the speed on TinyStories-656K and costs ~1 us per call.
  int64_t gemv_max_rows = 4;
  // true: every call, whatever its row count, runs the row-streaming kernels (or AMX, which
  // serves every n), so a row's result depends on that row alone and not on how many rows share
  // the call, their order or the thread count (batch invariance: a greedy or seeded request
  // gives the same tokens alone or beside others). false: many-row calls go to oneDNN, whose
  // reduction order depends on the row count. Cost: docs/kernels.md (Batch invariance).
  bool batch_invariant = true;
  // GEMV calls on weights of at least this many bytes split their rows across NumThreads()
  // threads; smaller ones stay on the calling thread (a fork/join costs ~2-3 us).
  int64_t parallel_min_bytes = int64_t{256} << 10;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_
