#include "engine/format/quantize.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/format/quantize_rows.h"
#include "engine/util/status_macros.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
// GCC 12 flags its own AVX-512 headers with -W(maybe-)uninitialized (a known false positive;
// engine/ops/simd.h does the same).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define TEXTGEN_QUANTIZE_AVX512 1
#endif

namespace textgen {

// Operation for operation as ggml's quantize_row_q8_0_ref (including the comparison of its
// MAX(a, b) macro), so the bytes match what llama-quantize writes.
void QuantizeBlockQ8_0Reference(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = F32ToF16(d);
  std::memcpy(block, &dh, sizeof(dh));
  int8_t* q = reinterpret_cast<int8_t*>(block + sizeof(dh));
  for (int64_t j = 0; j < kQ8_0BlockSize; ++j) {
    q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

namespace {

#ifdef TEXTGEN_QUANTIZE_AVX512
// The same block with AVX-512: the scalar loop (a roundf call per value, not vectorized) was the
// bottleneck of writing multi-GB Q8_0 files. For finite inputs every step is the same IEEE
// operation (the max is order-independent, x * id is one rounding, the rounding below is
// roundf's), so the bytes are identical; with NaN or inf in a block ggml's own float -> int8
// conversion is undefined, so there is nothing to match.
void QuantizeBlockQ8_0Avx512(const float* x, uint8_t* block) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 lo = _mm512_loadu_ps(x);       // [16]
  const __m512 hi = _mm512_loadu_ps(x + 16);  // [16]
  const __m512 amax16 = _mm512_max_ps(_mm512_and_ps(lo, abs_mask), _mm512_and_ps(hi, abs_mask));
  const float amax = _mm512_reduce_max_ps(amax16);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = F32ToF16(d);
  std::memcpy(block, &dh, sizeof(dh));
  const __m512 vid = _mm512_set1_ps(id);
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 one = _mm512_set1_ps(1.0f);
  auto quantize16 = [&](__m512 v, uint8_t* out) {
    v = _mm512_mul_ps(v, vid);
    // roundf: truncate, then step away from zero when the dropped fraction is >= 0.5
    // (v - trunc(v) is exact, so ties are detected exactly).
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_and_ps(_mm512_sub_ps(v, t), abs_mask);
    const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
    const __m512 step = _mm512_or_ps(one, _mm512_and_ps(v, sign_mask));  // copysign(1, v)
    const __m512 r = _mm512_mask_add_ps(t, up, t, step);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  };
  quantize16(lo, block + sizeof(dh));
  quantize16(hi, block + sizeof(dh) + 16);
}
#endif

// F16 by the F16C instruction where present: round to nearest even like F32ToF16, with the
// same results for subnormals, overflow and NaN (quieted, top payload bits kept).
void ToF16Row(const float* src, uint8_t* out, int64_t n) {
  int64_t i = 0;
#ifdef TEXTGEN_QUANTIZE_AVX512
  for (; i + 16 <= n; i += 16) {
    const __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), h);
  }
#endif
  for (; i < n; ++i) {
    const uint16_t h = F32ToF16(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

// BF16 with the integer steps of F32ToBF16 (round to nearest even, NaN quieted), 16 lanes at a
// time, so every input gives the scalar converter's bits.
void ToBF16Row(const float* src, uint8_t* out, int64_t n) {
  int64_t i = 0;
#ifdef TEXTGEN_QUANTIZE_AVX512
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(bias, odd)), 16);
    h = _mm512_mask_or_epi32(h, nan, _mm512_srli_epi32(x, 16), quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_cvtepi32_epi16(h));
  }
#endif
  for (; i < n; ++i) {
    const uint16_t h = F32ToBF16(src[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

using RowQuantizer = void (*)(const float* x, void* y, int64_t n);

// The block formats' quantizers (quantize_rows.h); nullptr for F32/F16/BF16/Q8_0, which
// FromF32 converts itself.
RowQuantizer RowQuantizerOf(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return &QuantizeRowQ4_0;
    case DType::kQ4_1:
      return &QuantizeRowQ4_1;
    case DType::kQ5_0:
      return &QuantizeRowQ5_0;
    case DType::kQ5_1:
      return &QuantizeRowQ5_1;
    case DType::kIQ4_NL:
      return &QuantizeRowIQ4_NL;
    case DType::kMXFP4:
      return &QuantizeRowMXFP4;
    case DType::kQ2_K:
      return &QuantizeRowQ2_K;
    case DType::kQ3_K:
      return &QuantizeRowQ3_K;
    case DType::kQ4_K:
      return &QuantizeRowQ4_K;
    case DType::kQ5_K:
      return &QuantizeRowQ5_K;
    case DType::kQ6_K:
      return &QuantizeRowQ6_K;
    case DType::kIQ4_XS:
      return &QuantizeRowIQ4_XS;
    default:
      return nullptr;
  }
}

}  // namespace

void QuantizeBlockQ8_0(const float* x, uint8_t* block) {
#ifdef TEXTGEN_QUANTIZE_AVX512
  QuantizeBlockQ8_0Avx512(x, block);
#else
  QuantizeBlockQ8_0Reference(x, block);
#endif
}

absl::Status FromF32(DType type, absl::Span<const float> src, absl::Span<uint8_t> dst) {
  const int64_t n = static_cast<int64_t>(src.size());
  TG_ASSIGN_OR_RETURN(size_t bytes, RowBytes(type, n));
  if (dst.size() != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("converting ", n, " values to ", std::string(DTypeName(type)),
                     ": destination has ", dst.size(), " bytes, needs ", bytes));
  }
  uint8_t* out = dst.data();
  if (RowQuantizer quantize = RowQuantizerOf(type); quantize != nullptr) {
    // RowBytes has checked that n is a whole number of blocks.
    quantize(src.data(), out, n);
    return absl::OkStatus();
  }
  switch (type) {
    case DType::kF32:
      if (n > 0) std::memcpy(out, src.data(), bytes);
      break;
    case DType::kF16:
      ToF16Row(src.data(), out, n);
      break;
    case DType::kBf16:
      ToBF16Row(src.data(), out, n);
      break;
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        QuantizeBlockQ8_0(src.data() + b * kQ8_0BlockSize, out + b * kQ8_0BlockBytes);
      }
      break;
    default:
      return absl::UnimplementedError(
          absl::StrCat("no quantizer for ", std::string(DTypeName(type))));
  }
  return absl::OkStatus();
}

}  // namespace textgen
