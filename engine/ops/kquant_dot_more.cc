#include "engine/ops/kquant_dot_more.h"

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/kquant_tiles_avx2.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// ---- portable dot products per super-block: the definition the SIMD versions follow ----
// Value index p = 128 h + 32 j + l (h half, j 2-bit plane, l < 32) for Q2_K / Q3_K.

float DotQ2K(const BlockQ2_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0, summs = 0;
  for (int sub = 0; sub < 16; ++sub) summs += (w.scales[sub] >> 4) * a.bsums[sub];
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * h + 2 * j + g;
        int32_t s = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          s += ((w.qs[32 * h + l] >> (2 * j)) & 3) * a.qs[128 * h + 32 * j + l];
        }
        sumi += (w.scales[sub] & 0xF) * s;
      }
    }
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotQ3K(const BlockQ3_K& w, const BlockQ8_K& a) {
  int8_t sc[16];
  Q3KScaleBits(w.scales, sc);
  int32_t sumi = 0;
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int g = 0; g < 2; ++g) {
        const int sub = 8 * h + 2 * j + g;
        // value = u - 4 with u = q2 + 4 * (high bit): the -4 goes through bsums.
        int32_t s = -4 * a.bsums[sub];
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int u =
              ((w.qs[32 * h + l] >> (2 * j)) & 3) | (((w.hmask[l] >> (4 * h + j)) & 1) << 2);
          s += u * a.qs[128 * h + 32 * j + l];
        }
        sumi += (sc[sub] - 32) * s;
      }
    }
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi);
}

float DotQ5K(const BlockQ5_K& w, const BlockQ8_K& a) {
  int32_t sumi = 0, summs = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    KScaleMin(j, w.scales, &sc, &mn);
    const uint8_t* q = w.qs + 32 * (j / 2);
    int32_t s = 0;
    for (int l = 0; l < 32; ++l) {
      const int v = (j % 2 == 0 ? (q[l] & 0xF) : (q[l] >> 4)) | (((w.qh[l] >> j) & 1) << 4);
      s += v * a.qs[32 * j + l];
    }
    sumi += sc * s;
    summs += mn * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return a.d * half::F16ToF32(w.d) * static_cast<float>(sumi) -
         a.d * half::F16ToF32(w.dmin) * static_cast<float>(summs);
}

float DotIQ4XS(const BlockIQ4_XS& w, const BlockQ8_K& a) {
  int32_t sumi = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* q = w.qs + 16 * ib;
    const int8_t* x = a.qs + 32 * ib;
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) {
      s += kIq4nlValues[q[l] & 0xF] * x[l] + kIq4nlValues[q[l] >> 4] * x[l + 16];
    }
    sumi += (IQ4XSScaleBits(w, ib) - 32) * s;
  }
  return half::F16ToF32(w.d) * a.d * static_cast<float>(sumi);
}

}  // namespace

namespace portable {
void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
  switch (w.type) {
    case WeightType::kQ2_K:
      return KQuantRows<BlockQ2_K, DotQ2K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ3_K:
      return KQuantRows<BlockQ3_K, DotQ3K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ5_K:
      return KQuantRows<BlockQ5_K, DotQ5K>(w, xq, n, y, ldy, r0, r1);
    case WeightType::kIQ4_XS:
      return KQuantRows<BlockIQ4_XS, DotIQ4XS>(w, xq, n, y, ldy, r0, r1);
    default:
      return;
  }
}
}  // namespace portable

void GemvKQuantInt8More(const WeightView& w, const BlockQ8_K* xq, int64_t n, float* y, int64_t ldy,
                        int64_t r0, int64_t r1) {
#if defined(__AVX2__)
  switch (w.type) {
    case WeightType::kQ5_K:
    case WeightType::kIQ4_XS:
      // The tiles of GemvKQuantInt8 (engine/ops/kquant_dot.cc at the VNNI levels,
      // engine/ops/kquant_tiles_avx2.cc below them; Q5_K as Q4_K with the fifth bit).
      return GemvKQuantInt8(w, xq, n, y, ldy, r0, r1);
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
#if defined(TG_KQUANT_512)
      // The 512-bit tiles of 8 or 4 weight rows (engine/ops/kquant_dot.cc).
      return GemvKQuantInt8(w, xq, n, y, ldy, r0, r1);
#else
      // One weight row x up to 4 activation rows per tile (256-bit).
      GemvKQuantTilesAvx2(w, xq, n, y, ldy, r0, r1);
      return;
#endif
    default:
      return;
  }
#else
  portable::GemvKQuantInt8More(w, xq, n, y, ldy, r0, r1);
#endif
}

TG_ISA_END
}  // namespace textgen::ops
