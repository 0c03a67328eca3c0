// Element types of weight tensors and their conversion to F32.
#ifndef TEXTGEN_ENGINE_FORMAT_DTYPE_H_
#define TEXTGEN_ENGINE_FORMAT_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace textgen {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBf16,
  kQ8_0,  // blocks of 32 values: one F16 scale then 32 int8 (34 bytes per block)
  // ggml's other quantized formats; block layouts in engine/format/quant_blocks.h.
  kQ4_0,    // 32 values, 18 bytes
  kQ4_1,    // 32 values, 20 bytes
  kQ5_0,    // 32 values, 22 bytes
  kQ5_1,    // 32 values, 24 bytes
  kQ2_K,    // 256 values, 84 bytes
  kQ3_K,    // 256 values, 110 bytes
  kQ4_K,    // 256 values, 144 bytes
  kQ5_K,    // 256 values, 176 bytes
  kQ6_K,    // 256 values, 210 bytes
  kIQ4_NL,  // 32 values, 18 bytes
  kIQ4_XS,  // 256 values, 136 bytes
  kMXFP4,   // 32 values, 17 bytes (one E8M0 scale byte, 32 E2M1 codes)
};
inline constexpr int kNumDTypes = 16;

inline constexpr int64_t kQ8_0BlockSize = 32;
inline constexpr size_t kQ8_0BlockBytes = 34;

// Values per block (1 for F32/F16/BF16) and bytes per block (the element size for those).
int64_t BlockSize(DType type);
size_t BlockBytes(DType type);
// True for the block formats (Q8_0 and the ggml formats added with it).
inline bool IsQuantized(DType type) { return BlockSize(type) > 1; }

// ggml type ids as stored in GGUF tensor infos.
inline constexpr uint32_t kGgmlTypeF32 = 0;
inline constexpr uint32_t kGgmlTypeF16 = 1;
inline constexpr uint32_t kGgmlTypeQ4_0 = 2;
inline constexpr uint32_t kGgmlTypeQ4_1 = 3;
inline constexpr uint32_t kGgmlTypeQ5_0 = 6;
inline constexpr uint32_t kGgmlTypeQ5_1 = 7;
inline constexpr uint32_t kGgmlTypeQ8_0 = 8;
inline constexpr uint32_t kGgmlTypeQ2_K = 10;
inline constexpr uint32_t kGgmlTypeQ3_K = 11;
inline constexpr uint32_t kGgmlTypeQ4_K = 12;
inline constexpr uint32_t kGgmlTypeQ5_K = 13;
inline constexpr uint32_t kGgmlTypeQ6_K = 14;
inline constexpr uint32_t kGgmlTypeIQ4_NL = 20;
inline constexpr uint32_t kGgmlTypeIQ4_XS = 23;
inline constexpr uint32_t kGgmlTypeBF16 = 30;
inline constexpr uint32_t kGgmlTypeMXFP4 = 39;

// Maps a ggml type id (GGUF tensor info) to a DType. A real ggml type this engine does not
// support (e.g. 16 = IQ2_XXS) gives Unimplemented; an id ggml does not define gives
// InvalidArgument. Both messages name the id (and the ggml name when known).
absl::StatusOr<DType> DTypeFromGgmlType(uint32_t ggml_type);
uint32_t GgmlTypeOf(DType type);
std::string_view DTypeName(DType type);  // ggml's names: "F32", "BF16", "Q4_K", "IQ4_XS"...

// Bytes of a row of `n` elements. For the block formats `n` must be a multiple of
// BlockSize(type) (else returns InvalidArgument) because blocks do not straddle rows. Negative
// `n` is InvalidArgument.
absl::StatusOr<size_t> RowBytes(DType type, int64_t n);

// Converts `n` elements starting at `src` (of `type`) to F32 into `dst` [n]. `src` needs no
// alignment (mapped files give none). For the block formats n must be a multiple of
// BlockSize(type). Every format gives ggml's dequantize_row_* values bit for bit (same F32
// operations in the same order, -0.0 included).
void ToF32(DType type, const void* src, float* dst, int64_t n);

// Exact conversions to F32 (subnormals, inf and NaN included) and round-to-nearest-even
// conversions from F32 (overflow gives inf, NaN stays a quiet NaN of the same sign).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
float BF16ToF32(uint16_t h);
uint16_t F32ToBF16(float f);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_DTYPE_H_
