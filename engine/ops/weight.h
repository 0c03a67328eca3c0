// A weight matrix as the kernels see it: its element type, where its bytes are (usually an
// mmapped GGUF tensor, read at its own size on every decode step) and its shape.
#ifndef TEXTGEN_ENGINE_OPS_WEIGHT_H_
#define TEXTGEN_ENGINE_OPS_WEIGHT_H_

#include <cstddef>
#include <cstdint>

namespace textgen::ops {

// Storage types of weights. Values match nothing on disk; the model maps file types to these.
enum class WeightType : uint8_t {
  kF32,
  kF16,   // IEEE half
  kBf16,  // bfloat16 (upper half of an F32)
  kQ8_0,  // ggml Q8_0: blocks of 32 values, each one F16 scale d then 32 int8 q; value = d * q
};

inline constexpr int64_t kQ8_0Block = 32;      // values per Q8_0 block
inline constexpr size_t kQ8_0BlockBytes = 34;  // 2-byte F16 scale + 32 int8

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
  }
  return "?";
}

// W [out, in] row-major in `type`; for kQ8_0, `in` is a multiple of 32 and each row is in/32
// consecutive BlockQ8_0. `data` needs no alignment. Borrowed: the owner (a mapped file or a
// buffer held by Linear) outlives every view.
struct WeightView {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  int64_t out = 0;
  int64_t in = 0;

  size_t row_bytes() const {
    switch (type) {
      case WeightType::kF32:
        return static_cast<size_t>(in) * 4;
      case WeightType::kF16:
      case WeightType::kBf16:
        return static_cast<size_t>(in) * 2;
      case WeightType::kQ8_0:
        return static_cast<size_t>(in / kQ8_0Block) * kQ8_0BlockBytes;
    }
    return 0;
  }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(out); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes();
  }
};

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_WEIGHT_H_
