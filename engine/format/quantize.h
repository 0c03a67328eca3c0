// F32 -> stored element type (F16, BF16 and every ggml block format) for writing model files;
// the inverse of ToF32.
#ifndef TEXTGEN_ENGINE_FORMAT_QUANTIZE_H_
#define TEXTGEN_ENGINE_FORMAT_QUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/format/dtype.h"

namespace textgen {

// Converts the F32 values `src` [n] to `type`, filling `dst` [RowBytes(type, n)] (no alignment
// needed). F16 and BF16 round to nearest even exactly as F32ToF16 / F32ToBF16 do. Q8_0 follows
// ggml's quantize_row_q8_0_ref (what llama-quantize writes) bit for bit: per block of 32,
// d = max|x| / 127, q = roundf(x / d) (ties away from zero), d stored as F16; an all-zero block
// has d = 0 and q = 0. Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (blocks of 32) and Q2_K..Q6_K, IQ4_XS
// (super-blocks of 256) follow ggml's reference quantizers without an importance matrix, what
// llama-quantize writes (quantize_rows.h), byte for byte on llama.cpp's own test vectors;
// MXFP4 (blocks of 32) as ggml's quantize_row_mxfp4_ref, the only MXFP4 quantizer ggml has.
// Blocks are independent, so `src` may hold several rows of a tensor, and the bytes do not
// depend on how a tensor is split between calls (threads may convert disjoint rows).
// InvalidArgument when n is not a whole number of the type's blocks, or when dst.size() is
// not the converted size; `dst` is untouched on error. Thread-safe (no state).
absl::Status FromF32(DType type, absl::Span<const float> src, absl::Span<uint8_t> dst);

// One Q8_0 block: `x` [32] -> `block` [34 bytes: uint16 F16 scale, int8 q[32]]. Uses AVX-512
// when built for it; the bytes equal QuantizeBlockQ8_0Reference's for finite inputs.
void QuantizeBlockQ8_0(const float* x, uint8_t* block);
// ggml's quantize_row_q8_0_ref for one block, operation for operation (the portable fallback,
// and what tests compare the fast path with).
void QuantizeBlockQ8_0Reference(const float* x, uint8_t* block);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_QUANTIZE_H_
