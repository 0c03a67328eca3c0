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
  kBF16,
  kQ8_0,  // blocks of 32 values: one F16 scale then 32 int8 (34 bytes per block)
};

inline constexpr int64_t kQ8_0BlockSize = 32;
inline constexpr size_t kQ8_0BlockBytes = 34;

// ggml type ids as stored in GGUF tensor infos.
inline constexpr uint32_t kGgmlTypeF32 = 0;
inline constexpr uint32_t kGgmlTypeF16 = 1;
inline constexpr uint32_t kGgmlTypeQ8_0 = 8;
inline constexpr uint32_t kGgmlTypeBF16 = 30;

// Maps a ggml type id (GGUF tensor info) to a DType. A real ggml type this engine does not
// support (e.g. 12 = Q4_K) gives Unimplemented; an id ggml does not define gives
// InvalidArgument. Both messages name the id (and the ggml name when known).
absl::StatusOr<DType> DTypeFromGgmlType(uint32_t ggml_type);
uint32_t GgmlTypeOf(DType type);
std::string_view DTypeName(DType type);  // "F32", "F16", "BF16", "Q8_0"

// Bytes of a row of `n` elements. For kQ8_0, `n` must be a multiple of 32 (else returns
// InvalidArgument) because blocks do not straddle rows. Negative `n` is InvalidArgument.
absl::StatusOr<size_t> RowBytes(DType type, int64_t n);

// Converts `n` elements starting at `src` (of `type`) to F32 into `dst` [n]. `src` needs no
// alignment (mapped files give none). For kQ8_0, n must be a multiple of 32.
void ToF32(DType type, const void* src, float* dst, int64_t n);

// Exact conversions to F32 (subnormals, inf and NaN included) and round-to-nearest-even
// conversions from F32 (overflow gives inf, NaN stays a quiet NaN of the same sign).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
float BF16ToF32(uint16_t h);
uint16_t F32ToBF16(float f);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_DTYPE_H_
