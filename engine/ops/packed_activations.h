// One call's quantized activations repacked for an AVX-512 VNNI weight kernel: made once per
// call by the caller's thread, then read by every thread's row range (was once per range: 16
// times per call on 2 threads). The layout is the kernel's: for the tiles of
// engine/ops/quant_dot_small.cc (Q4_1 / Q5_0 / Q5_1 / IQ4_NL) blocks go two per 16 int32 lanes,
// padded to an even count with a zero block (the fields below); for Q8_0's column lanes
// (engine/ops/q8_0_gemv.cc) only d and c, one per block ([n, nb]: F32 d_x, -128 x sum q_x).
#ifndef TEXTGEN_ENGINE_OPS_PACKED_ACTIVATIONS_H_
#define TEXTGEN_ENGINE_OPS_PACKED_ACTIVATIONS_H_

#include <cstdint>
#include <vector>

namespace textgen::ops {

struct PackedActivations {
  std::vector<int8_t> q;   // [n, nbp * 32] the 8-bit values
  std::vector<float> d;    // [n, nbp * 8] d_x of each lane's block
  std::vector<float> s;    // [n, nbp * 8] the Q4_1 / Q5_1 min term (empty for Q8_0)
  std::vector<int32_t> c;  // [n, nbp * 8] the weights' offset x the sum of the lane's 4 q_x
  int64_t nbp = 0;         // blocks per row, rounded up to even
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_PACKED_ACTIVATIONS_H_
