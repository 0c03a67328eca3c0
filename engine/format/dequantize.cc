#include "engine/format/dequantize.h"

#include <cstring>

#include "engine/format/quant_blocks.h"
#include "engine/format/quant_dequantize_inl.h"

// The reference values are ggml's, computed without fused multiply-adds; a contracted
// `d * q - m` would differ in the last bit. CMake also passes -ffp-contract=off for this file.
#pragma GCC optimize("fp-contract=off")

namespace textgen {
void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / BlockSize(type);
  switch (type) {
    case DType::kQ4_0:
      return quant_ref::Q4_0<F16ToF32>(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::kQ4_1:
      return quant_ref::Q4_1<F16ToF32>(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::kQ5_0:
      return quant_ref::Q5_0<F16ToF32>(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::kQ5_1:
      return quant_ref::Q5_1<F16ToF32>(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::kQ2_K:
      return quant_ref::Q2_K<F16ToF32>(static_cast<const BlockQ2_K*>(src), dst, nb);
    case DType::kQ3_K:
      return quant_ref::Q3_K<F16ToF32>(static_cast<const BlockQ3_K*>(src), dst, nb);
    case DType::kQ4_K:
      return quant_ref::Q4_K<F16ToF32>(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ5_K:
      return quant_ref::Q5_K<F16ToF32>(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::kQ6_K:
      return quant_ref::Q6_K<F16ToF32>(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::kIQ4_NL:
      return quant_ref::IQ4_NL<F16ToF32>(static_cast<const BlockIQ4_NL*>(src), dst, nb);
    case DType::kIQ4_XS:
      return quant_ref::IQ4_XS<F16ToF32>(static_cast<const BlockIQ4_XS*>(src), dst, nb);
    case DType::kMXFP4:
      return quant_ref::MXFP4(static_cast<const BlockMXFP4*>(src), dst, nb);
    default:
      return;  // F32/F16/BF16/Q8_0: ToF32's own cases
  }
}

}  // namespace textgen
