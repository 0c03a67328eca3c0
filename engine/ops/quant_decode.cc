#include "engine/ops/quant_decode.h"

#include <cstring>

#include "engine/format/quant_blocks.h"
#include "engine/format/quant_dequantize_inl.h"
#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/quant_unpack.h"

// The reference values are ggml's, computed without fused multiply-adds; a contracted
// `d * q - m` would differ in the last bit. CMake also passes -ffp-contract=off for this file.
#pragma GCC optimize("fp-contract=off")

namespace textgen::ops {
TG_ISA_BEGIN
namespace portable {

void DecodeRowF32(WeightType type, const uint8_t* src, float* dst, int64_t n) {
  const int64_t nb = n / WeightBlockSize(type);
  switch (type) {
    case WeightType::kQ4_0:
      return quant_ref::Q4_0<half::F16ToF32>(reinterpret_cast<const BlockQ4_0*>(src), dst, nb);
    case WeightType::kQ4_1:
      return quant_ref::Q4_1<half::F16ToF32>(reinterpret_cast<const BlockQ4_1*>(src), dst, nb);
    case WeightType::kQ5_0:
      return quant_ref::Q5_0<half::F16ToF32>(reinterpret_cast<const BlockQ5_0*>(src), dst, nb);
    case WeightType::kQ5_1:
      return quant_ref::Q5_1<half::F16ToF32>(reinterpret_cast<const BlockQ5_1*>(src), dst, nb);
    case WeightType::kQ2_K:
      return quant_ref::Q2_K<half::F16ToF32>(reinterpret_cast<const BlockQ2_K*>(src), dst, nb);
    case WeightType::kQ3_K:
      return quant_ref::Q3_K<half::F16ToF32>(reinterpret_cast<const BlockQ3_K*>(src), dst, nb);
    case WeightType::kQ4_K:
      return quant_ref::Q4_K<half::F16ToF32>(reinterpret_cast<const BlockQ4_K*>(src), dst, nb);
    case WeightType::kQ5_K:
      return quant_ref::Q5_K<half::F16ToF32>(reinterpret_cast<const BlockQ5_K*>(src), dst, nb);
    case WeightType::kQ6_K:
      return quant_ref::Q6_K<half::F16ToF32>(reinterpret_cast<const BlockQ6_K*>(src), dst, nb);
    case WeightType::kIQ4_NL:
      return quant_ref::IQ4_NL<half::F16ToF32>(reinterpret_cast<const BlockIQ4_NL*>(src), dst, nb);
    case WeightType::kIQ4_XS:
      return quant_ref::IQ4_XS<half::F16ToF32>(reinterpret_cast<const BlockIQ4_XS*>(src), dst, nb);
    case WeightType::kMXFP4:
      return quant_ref::MXFP4(reinterpret_cast<const BlockMXFP4*>(src), dst, nb);
    default:
      return;
  }
}

void DecodeRowBf16(WeightType type, const uint8_t* src, uint16_t* dst, int64_t n) {
  // A block's worth at a time through L1.
  float buf[kQkK];
  const int64_t step = WeightBlockSize(type);
  for (int64_t k = 0; k < n; k += step) {
    portable::DecodeRowF32(type, src + k / step * WeightBlockBytes(type), buf, step);
    for (int64_t l = 0; l < step; ++l) dst[k + l] = half::F32ToBf16(buf[l]);
  }
}

}  // namespace portable

#if defined(TG_QUANT_UNPACK)
namespace {

// Each block's values widened in registers (quant_unpack.h) and handed to
// store(vector, value offset) as 16 (AVX-512) or 8 (AVX2) F32 lanes.
template <typename Fmt, typename Store>
inline void ForEachVector(const uint8_t* src, int64_t n, Store&& store) {
  float a[unpack::kGroups<Fmt>], b[unpack::kGroups<Fmt>];
  for (int64_t k = 0; k < n; k += Fmt::kValues, src += Fmt::kBytes) {
    Fmt::Scales(src, a, b);
    unpack::Unroll<Fmt::kChunks>([&](auto c) {
#if defined(__AVX512F__)
      store(unpack::Widen16<Fmt, c>(src, a, b), k + 16 * c);
#else
      __m256 lo, hi;
      unpack::Widen8x2<Fmt, c>(src, a, b, &lo, &hi);
      store(lo, k + 16 * c);
      store(hi, k + 16 * c + 8);
#endif
    });
  }
}

}  // namespace

void DecodeRowF32(WeightType type, const uint8_t* src, float* dst, int64_t n) {
  unpack::Visit(type, [&]<typename Fmt>(Fmt) {
    ForEachVector<Fmt>(src, n, [dst](auto v, int64_t k) {
#if defined(__AVX512F__)
      _mm512_storeu_ps(dst + k, v);
#else
      _mm256_storeu_ps(dst + k, v);
#endif
    });
  });
}

void DecodeRowBf16(WeightType type, const uint8_t* src, uint16_t* dst, int64_t n) {
  unpack::Visit(type, [&]<typename Fmt>(Fmt) {
    ForEachVector<Fmt>(src, n, [dst](auto v, int64_t k) {
#if defined(__AVX512F__)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), simd::RoundToBf16(v));
#else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), simd::RoundToBf16(v));
#endif
    });
  });
}
#else
void DecodeRowF32(WeightType type, const uint8_t* src, float* dst, int64_t n) {
  portable::DecodeRowF32(type, src, dst, n);
}

void DecodeRowBf16(WeightType type, const uint8_t* src, uint16_t* dst, int64_t n) {
  portable::DecodeRowBf16(type, src, dst, n);
}
#endif  // TG_QUANT_UNPACK

TG_ISA_END
}  // namespace textgen::ops
