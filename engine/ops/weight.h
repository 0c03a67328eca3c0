// A weight matrix as the kernels see it: its element type, where its bytes are (usually an
// mmapped GGUF tensor, read at its own size on every decode step) and its shape.
#ifndef TEXTGEN_ENGINE_OPS_WEIGHT_H_
#define TEXTGEN_ENGINE_OPS_WEIGHT_H_

#include <cstddef>
#include <cstdint>

#include "engine/format/dtype.h"

namespace textgen::ops {

// Storage types of weights: the format's element types (engine/format/dtype.h), one enum for
// the file readers and the kernels.
using WeightType = ::textgen::DType;
inline constexpr int kWeightTypeCount = kNumDTypes;
static_assert(static_cast<int>(WeightType::kMXFP4) + 1 == kWeightTypeCount);

// Values per block (1 for F32/F16/BF16) and bytes per block (the element size for those).
inline constexpr int64_t WeightBlockSize(WeightType t) {
  switch (t) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBf16:
      return 1;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kIQ4_NL:
    case WeightType::kMXFP4:
      return 32;
    default:
      return 256;
  }
}
inline constexpr size_t WeightBlockBytes(WeightType t) {
  constexpr size_t kBytes[] = {4, 2, 2, 34, 18, 20, 22, 24, 84, 110, 144, 176, 210, 18, 136, 17};
  return kBytes[static_cast<int>(t)];
}
// True for the block formats other than Q8_0 (served by engine/ops/quant_gemv.h).
inline constexpr bool IsKQuantFamily(WeightType t) {
  return static_cast<int>(t) > static_cast<int>(WeightType::kQ8_0);
}

inline constexpr int64_t kQ8_0Block = kQ8_0BlockSize;  // values per Q8_0 block

// One Q8_0 block exactly as GGUF stores it (2-byte aligned at best: never assume more).
struct BlockQ8_0 {
  uint16_t d;  // F16 bits of the scale
  int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == kQ8_0BlockBytes);

inline const char* WeightTypeName(WeightType t) {
  switch (t) {
    case WeightType::kF32:
      return "f32";
    case WeightType::kF16:
      return "f16";
    case WeightType::kBf16:
      return "bf16";
    case WeightType::kQ8_0:
      return "q8_0";
    case WeightType::kQ4_0:
      return "q4_0";
    case WeightType::kQ4_1:
      return "q4_1";
    case WeightType::kQ5_0:
      return "q5_0";
    case WeightType::kQ5_1:
      return "q5_1";
    case WeightType::kQ2_K:
      return "q2_k";
    case WeightType::kQ3_K:
      return "q3_k";
    case WeightType::kQ4_K:
      return "q4_k";
    case WeightType::kQ5_K:
      return "q5_k";
    case WeightType::kQ6_K:
      return "q6_k";
    case WeightType::kIQ4_NL:
      return "iq4_nl";
    case WeightType::kIQ4_XS:
      return "iq4_xs";
    case WeightType::kMXFP4:
      return "mxfp4";
  }
  return "?";
}

// W [out, in] row-major in `type`; for the block formats, `in` is a multiple of
// WeightBlockSize(type) and each row is in / WeightBlockSize(type) consecutive blocks. `data` needs
// no alignment. Borrowed: the owner (a mapped file or a buffer held by Linear) outlives every view.
struct WeightView {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  int64_t out = 0;
  int64_t in = 0;

  size_t row_bytes() const {
    return static_cast<size_t>(in / WeightBlockSize(type)) * WeightBlockBytes(type);
  }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(out); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes();
  }
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_WEIGHT_H_
