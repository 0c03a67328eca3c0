#include "engine/ops/gemv_bf16_dot.h"

#include <cstring>
#include <vector>

#include "engine/ops/gemv_float.h"
#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

#if defined(__AVX512BF16__)
// MR activation rows x NR weight rows; each weight vector (32 BF16) loaded once for all MR.
template <int MR, int NR>
inline void Tile(const uint16_t* w, int64_t in, const uint16_t* x, float* y, int64_t ldy) {
  __m512 acc[MR][NR];
  TG_UNROLL
  for (int i = 0; i < MR; ++i) {
    TG_UNROLL
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t k, __mmask32 m) {
    __m512i wv[NR];
    TG_UNROLL
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_epi16(m, w + j * in + k);
    TG_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_maskz_loadu_epi16(m, x + i * in + k);
      TG_UNROLL
      for (int j = 0; j < NR; ++j) {
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<__m512bh>(xv),
                                     reinterpret_cast<__m512bh>(wv[j]));
      }
    }
  };
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) step(k, ~__mmask32{0});
  if (k < in) step(k, static_cast<__mmask32>((uint64_t{1} << (in - k)) - 1));
  simd::StoreSums<MR, NR>(acc, y, ldy);
}

template <int MR, int NR>
void Rows(const WeightView& w, const uint16_t* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const auto* base = static_cast<const uint16_t*>(w.data);
  const int64_t in = w.in;
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) Tile<MR, NR>(base + r * in, in, x, y + r, ldy);
  if constexpr (NR > 4) {
    for (; r + 4 <= r1; r += 4) Tile<MR, 4>(base + r * in, in, x, y + r, ldy);
  }
  for (; r < r1; ++r) Tile<MR, 1>(base + r * in, in, x, y + r, ldy);
}
#endif

}  // namespace

void ToBf16Activations(const float* x, int64_t count, uint16_t* xb) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 16 <= count; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    std::memcpy(xb + i, &v, sizeof(v));
  }
#elif defined(TG_SIMD_AVX2)
  for (; i + 8 <= count; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xb + i), simd::RoundToBf16(_mm256_loadu_ps(x + i)));
  }
#endif
  for (; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      xb[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
      continue;
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    xb[i] = static_cast<uint16_t>(bits >> 16);
  }
}

void GemvBf16Dot(const WeightView& w, const uint16_t* xb, int64_t n, float* y, int64_t ldy,
                 int64_t r0, int64_t r1) {
#if defined(__AVX512BF16__)
  simd::ForActivationRows<8, 8>(n, [&]<int MR, int NR>(int64_t i) {
    Rows<MR, NR>(w, xb + i * w.in, y + i * ldy, ldy, r0, r1);
  });
#elif defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  // No BF16 dot-product instruction (x86-64-v3, or AVX-512 CPUs before Cooper Lake): the
  // activations are widened back to F32 (exact) once per call, xf [n, in], and GemvBf16's
  // vector kernel widens the weights in registers. A BF16 x BF16 product is exact in F32, so
  // this is VDPBF16PS's arithmetic up to summation order.
  thread_local std::vector<float> xf;
  xf.resize(static_cast<size_t>(n * w.in));
  int64_t k = 0;
#if defined(TG_SIMD_AVX2)
  for (; k + 8 <= n * w.in; k += 8) _mm256_storeu_ps(xf.data() + k, simd::LoadBf16(xb + k));
#endif
  for (; k < n * w.in; ++k) xf[k] = half::Bf16ToF32(xb[k]);
  GemvBf16(w, xf.data(), n, y, ldy, r0, r1);
#else
  // Portable: pairs multiplied in F32 (exact for BF16 inputs), F32 sums.
  const auto* base = static_cast<const uint16_t*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.in; ++k) {
        acc += half::Bf16ToF32(xb[i * w.in + k]) * half::Bf16ToF32(base[r * w.in + k]);
      }
      y[i * ldy + r] = acc;
    }
  }
#endif
}

TG_ISA_END
}  // namespace textgen::ops
