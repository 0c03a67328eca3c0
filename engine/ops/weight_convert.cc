#include "engine/ops/weight_convert.h"

#include <cstring>
#include <vector>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/quant_decode.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// Rows [r0, r1) are one contiguous run of the source: its start and its element count.
const uint8_t* RangeStart(const WeightView& w, int64_t r0) { return w.row(r0); }
int64_t RangeElems(const WeightView& w, int64_t r0, int64_t r1) { return (r1 - r0) * w.in; }

#if defined(__AVX512F__)
inline __m512 LoadF16(const uint8_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 LoadBf16(const uint8_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

// Q8_0 block -> 32 F32 values in two vectors: F32(d) * q.
inline void DequantBlock(const uint8_t* blk, __m512* lo, __m512* hi) {
  const __m512 d = _mm512_set1_ps(half::F16ToF32(half::LoadU16(blk)));
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
  *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
  *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
}

// Calls f(vector, element offset, mask) for count 16-bit source values in steps of 16.
template <typename Load, typename F>
inline void ForEach16(const uint8_t* src, int64_t count, Load load, F f) {
  for (int64_t k = 0; k < count; k += 16) {
    const __mmask16 m = simd::TailMask(count - k);
    f(load(src + 2 * k, m), k, m);
  }
}
#elif defined(TG_SIMD_AVX2)
// Calls f(8 values as F32, element offset) for the whole vectors of the range's `count`
// values (count / 8 * 8 of them; Q8_0 counts are whole blocks, so all), and returns how many.
template <typename F>
inline int64_t ForEach8(WeightType type, const uint8_t* src, int64_t count, F f) {
  const int64_t whole = count / 8 * 8;
  for (int64_t k = 0; k < whole; k += 8) {
    switch (type) {
      case WeightType::kF32:
        f(_mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * k)), k);
        break;
      case WeightType::kF16:
        f(simd::LoadF16(reinterpret_cast<const uint16_t*>(src + 2 * k)), k);
        break;
      case WeightType::kBf16:
        f(simd::LoadBf16(reinterpret_cast<const uint16_t*>(src + 2 * k)), k);
        break;
      case WeightType::kQ8_0: {
        const uint8_t* blk = src + k / kQ8_0Block * kQ8_0BlockBytes;
        const __m256 d = _mm256_set1_ps(half::F16ToF32(half::LoadU16(blk)));
        const __m128i q =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + k % kQ8_0Block));
        f(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d), k);
        break;
      }
      default:  // the block formats other than Q8_0 are decoded by quant_decode.h
        break;
    }
  }
  return whole;
}

// Element k of the range as F32, for the tails ForEach8 leaves (not Q8_0).
inline float ScalarAt(WeightType type, const uint8_t* src, int64_t k) {
  switch (type) {
    case WeightType::kF16:
      return half::F16ToF32(half::LoadU16(src + 2 * k));
    case WeightType::kBf16:
      return half::Bf16ToF32(half::LoadU16(src + 2 * k));
    default: {
      float v;
      std::memcpy(&v, src + 4 * k, sizeof(v));
      return v;
    }
  }
}
#endif  // __AVX512F__

// Block formats other than Q8_0, one row at a time (rows never split blocks): the exact
// decoders' values, and for BF16 those rounded to nearest even. `scalar` picks the portable
// decoders.
void DecodeRowsF32(const WeightView& w, int64_t r0, int64_t r1, float* dst, bool scalar) {
  for (int64_t r = r0; r < r1; ++r) {
    float* out = dst + (r - r0) * w.in;
    if (scalar) {
      portable::DecodeRowF32(w.type, w.row(r), out, w.in);
    } else {
      DecodeRowF32(w.type, w.row(r), out, w.in);
    }
  }
}

void DecodeRowsBf16(const WeightView& w, int64_t r0, int64_t r1, uint16_t* dst, bool scalar) {
  for (int64_t r = r0; r < r1; ++r) {
    uint16_t* out = dst + (r - r0) * w.in;
    if (scalar) {
      portable::DecodeRowBf16(w.type, w.row(r), out, w.in);
    } else {
      DecodeRowBf16(w.type, w.row(r), out, w.in);
    }
  }
}

}  // namespace

namespace portable {

void ConvertRowsF32(const WeightView& w, int64_t r0, int64_t r1, float* dst) {
  if (IsKQuantFamily(w.type)) return DecodeRowsF32(w, r0, r1, dst, /*scalar=*/true);
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  switch (w.type) {
    case WeightType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case WeightType::kF16:
      for (int64_t k = 0; k < count; ++k) dst[k] = half::F16ToF32(half::LoadU16(src + 2 * k));
      return;
    case WeightType::kBf16:
      for (int64_t k = 0; k < count; ++k) dst[k] = half::Bf16ToF32(half::LoadU16(src + 2 * k));
      return;
    case WeightType::kQ8_0:
      for (int64_t b = 0; b < count / kQ8_0Block; ++b) {
        const uint8_t* blk = src + b * kQ8_0BlockBytes;
        const float d = half::F16ToF32(half::LoadU16(blk));
        const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int64_t k = 0; k < kQ8_0Block; ++k) {
          dst[b * kQ8_0Block + k] = d * static_cast<float>(q[k]);
        }
      }
      return;
    default:
      return;  // block formats other than Q8_0: DecodeRows above
  }
}

void ConvertRowsBf16(const WeightView& w, int64_t r0, int64_t r1, uint16_t* dst) {
  if (IsKQuantFamily(w.type)) return DecodeRowsBf16(w, r0, r1, dst, /*scalar=*/true);
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  switch (w.type) {
    case WeightType::kF32:
      for (int64_t k = 0; k < count; ++k) {
        float v;
        std::memcpy(&v, src + 4 * k, sizeof(v));
        dst[k] = half::F32ToBf16(v);
      }
      return;
    case WeightType::kF16:
      for (int64_t k = 0; k < count; ++k) {
        dst[k] = half::F32ToBf16(half::F16ToF32(half::LoadU16(src + 2 * k)));
      }
      return;
    case WeightType::kBf16:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(uint16_t));
      return;
    case WeightType::kQ8_0:
      for (int64_t b = 0; b < count / kQ8_0Block; ++b) {
        const uint8_t* blk = src + b * kQ8_0BlockBytes;
        const float d = half::F16ToF32(half::LoadU16(blk));
        const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
        for (int64_t k = 0; k < kQ8_0Block; ++k) {
          dst[b * kQ8_0Block + k] = half::F32ToBf16(d * static_cast<float>(q[k]));
        }
      }
      return;
    default:
      return;  // block formats other than Q8_0: DecodeRows above
  }
}

}  // namespace portable

void ConvertRowsF32(const WeightView& w, int64_t r0, int64_t r1, float* dst) {
  if (IsKQuantFamily(w.type)) return DecodeRowsF32(w, r0, r1, dst, /*scalar=*/false);
#if defined(__AVX512F__)
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  auto store = [dst](__m512 v, int64_t k, __mmask16 m) { _mm512_mask_storeu_ps(dst + k, m, v); };
  switch (w.type) {
    case WeightType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case WeightType::kF16:
      ForEach16(src, count, LoadF16, store);
      return;
    case WeightType::kBf16:
      ForEach16(src, count, LoadBf16, store);
      return;
    case WeightType::kQ8_0:
      for (int64_t b = 0; b < count / kQ8_0Block; ++b) {
        __m512 lo, hi;
        DequantBlock(src + b * kQ8_0BlockBytes, &lo, &hi);
        _mm512_storeu_ps(dst + b * kQ8_0Block, lo);
        _mm512_storeu_ps(dst + b * kQ8_0Block + 16, hi);
      }
      return;
    default:
      return;  // block formats other than Q8_0: DecodeRows above
  }
#elif defined(TG_SIMD_AVX2)
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  if (w.type == WeightType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  int64_t k =
      ForEach8(w.type, src, count, [dst](__m256 v, int64_t k) { _mm256_storeu_ps(dst + k, v); });
  for (; k < count; ++k) dst[k] = ScalarAt(w.type, src, k);
#else
  portable::ConvertRowsF32(w, r0, r1, dst);
#endif
}

void ConvertRowsBf16(const WeightView& w, int64_t r0, int64_t r1, uint16_t* dst) {
  if (IsKQuantFamily(w.type)) return DecodeRowsBf16(w, r0, r1, dst, /*scalar=*/false);
#if defined(__AVX512F__)
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  auto store = [dst](__m512 v, int64_t k, __mmask16 m) {
    _mm256_mask_storeu_epi16(dst + k, m, simd::RoundToBf16(v));
  };
  switch (w.type) {
    case WeightType::kF32:
      for (int64_t k = 0; k < count; k += 16) {
        const __mmask16 m = simd::TailMask(count - k);
        store(_mm512_maskz_loadu_ps(m, src + 4 * k), k, m);
      }
      return;
    case WeightType::kF16:
      ForEach16(src, count, LoadF16, store);
      return;
    case WeightType::kBf16:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(uint16_t));
      return;
    case WeightType::kQ8_0:
      for (int64_t b = 0; b < count / kQ8_0Block; ++b) {
        __m512 lo, hi;
        DequantBlock(src + b * kQ8_0BlockBytes, &lo, &hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * kQ8_0Block),
                            simd::RoundToBf16(lo));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * kQ8_0Block + 16),
                            simd::RoundToBf16(hi));
      }
      return;
    default:
      return;  // block formats other than Q8_0: DecodeRows above
  }
#elif defined(TG_SIMD_AVX2)
  const uint8_t* src = RangeStart(w, r0);
  const int64_t count = RangeElems(w, r0, r1);
  if (w.type == WeightType::kBf16) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(uint16_t));
    return;
  }
  int64_t k = ForEach8(w.type, src, count, [dst](__m256 v, int64_t k) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), simd::RoundToBf16(v));
  });
  for (; k < count; ++k) dst[k] = half::F32ToBf16(ScalarAt(w.type, src, k));
#else
  portable::ConvertRowsBf16(w, r0, r1, dst);
#endif
}

TG_ISA_END
}  // namespace textgen::ops
