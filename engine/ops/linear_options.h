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
  // kAuto: calls with n <= direct_max_rows use the direct kernel when ops run on one thread
  // (NumThreads() == 1, as for tiny models) or the weights have at most
  // direct_max_weight_elems elements; the rest go to oneDNN. Why: with few rows a matmul is a
  // stream over the weights, and the direct kernel reads each weight vector once for all rows
  // with no per-call cost, while oneDNN's M=1 JIT kernel ran at a third of the speed on
  // TinyStories-656K (decode step 116 -> 91 us) and costs ~1 us per call on tiny weights. With
  // more threads oneDNN can split large weights across cores, hence the size limit there.
  int64_t direct_max_rows = 4;
  int64_t direct_max_weight_elems = int64_t{1} << 16;
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_LINEAR_OPTIONS_H_
