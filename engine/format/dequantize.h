// ggml's block formats (engine/format/quant_blocks.h) to F32: the reference dequantizers.
#ifndef TEXTGEN_ENGINE_FORMAT_DEQUANTIZE_H_
#define TEXTGEN_ENGINE_FORMAT_DEQUANTIZE_H_

#include <cstdint>

#include "engine/format/dtype.h"

namespace textgen {

// `n` values (a multiple of BlockSize(type)) of the blocks at `src` (any alignment) into
// dst [n]. Bit for bit ggml's dequantize_row_<type>: the same F32 operations in the same order
// (this file is compiled without FMA contraction so `d * q - m` rounds twice, as ggml's and
// gguf-py's do). `type` must be a block format other than Q8_0 (ToF32 handles Q8_0, F32, F16
// and BF16). Thread-safe.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_DEQUANTIZE_H_
