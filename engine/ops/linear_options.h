// Options of Linear (engine/ops/linear.h), kept apart so kernels can see them without the
// front end.
#ifndef TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_
#define TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_

#include <cstdint>

namespace textgen::ops {

// Arithmetic of the product. Inputs and outputs are F32 in every mode.
enum class LinearCompute : uint8_t {
  // F32 multiplies with F32 accumulation; agrees with a double reference to ~1e-6 relative.
  kF32,
  // Weights stored as BF16 (converted once at Create; halves their memory traffic) and
  // activations rounded to BF16 per call; F32 accumulation. ~3 significant digits per product.
  kBf16,
};

// Which kernel serves a call. kAuto picks per call from the number of rows (see Linear).
enum class LinearKernel : uint8_t {
  kAuto,
  kOneDnn,  // oneDNN matmul primitive with a run-time row count
  kDirect,  // single-threaded AVX-512 dot products; F32 compute only
};

struct LinearOptions {
  LinearCompute compute = LinearCompute::kF32;
  LinearKernel kernel = LinearKernel::kAuto;
  // F32 compute only. false: Linear keeps a pointer to the caller's weights (e.g. an mmapped
  // F32 tensor) which must outlive it. true: Linear copies them, so the caller may free a
  // temporary buffer (e.g. weights dequantized from F16/Q8_0). kBf16 always owns its copy.
  bool copy_weights = false;
  // kAuto: calls with n <= direct_max_rows and weights of at most direct_max_weight_elems
  // elements use the direct kernel, the rest oneDNN. Measured at 1 thread: direct wins for
  // n <= 2 on tiny weights (64x64, n=1: 0.37 vs 1.18 us; 172x64, n=2: 1.5 vs 1.9 us), ties at
  // n = 3-4 and at 512x64 (L2-bound), and loses beyond. The direct kernel never forks OpenMP
  // threads, which is what makes tiny calls cheap with NumThreads() > 1.
  int64_t direct_max_rows = 2;
  int64_t direct_max_weight_elems = int64_t{1} << 14;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_
