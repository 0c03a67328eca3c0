// Quantizers for the 32-value block formats Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4, operation for
// operation as ggml's reference quantizers, so the bytes match llama-quantize's (see
// quantize_rows.h for why the order of float operations matters).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/format/dtype.h"
#include "engine/format/quant_blocks.h"
#include "engine/format/quantize_rows.h"

namespace textgen {

namespace quant_internal {

int NearestInt(float f) {
  // Adding 1.5 * 2^23 puts the integer part in the low mantissa bits, rounded to nearest even
  // by the addition itself.
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

int BestIndexInt8(int n, const int8_t* values, float x) {
  if (x <= values[0]) return 0;
  if (x >= values[n - 1]) return n - 1;
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - values[hi - 1] < values[hi] - x ? hi - 1 : hi;
}

}  // namespace quant_internal

namespace {

constexpr int kQK = 32;

// The value of largest magnitude, keeping its sign (the first one on ties, as ggml).
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

}  // namespace

void QuantizeRowQ4_0(const float* x, void* vy, int64_t n) {
  BlockQ4_0* y = static_cast<BlockQ4_0*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    // The scale maps the extreme value to -8, so the other sign gets the finer +7 side.
    const float d = SignedAbsMax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[kQK / 2 + j] * id;
      // Truncation after adding 8.5: round half up, as ggml (not roundf).
      const uint8_t q0 = std::min<int>(15, static_cast<int8_t>(x0 + 8.5f));
      const uint8_t q1 = std::min<int>(15, static_cast<int8_t>(x1 + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_1(const float* x, void* vy, int64_t n) {
  BlockQ4_1* y = static_cast<BlockQ4_1*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    y[i].m = F32ToF16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[kQK / 2 + j] - min) * id;
      const uint8_t q0 = std::min<int>(15, static_cast<int8_t>(x0 + 0.5f));
      const uint8_t q1 = std::min<int>(15, static_cast<int8_t>(x1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* x, void* vy, int64_t n) {
  BlockQ5_0* y = static_cast<BlockQ5_0*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = SignedAbsMax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[kQK / 2 + j] * id;
      const uint8_t q0 = std::min<int>(31, static_cast<int8_t>(x0 + 16.5f));
      const uint8_t q1 = std::min<int>(31, static_cast<int8_t>(x1 + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      // The fifth bits: value j's in bit j, value j + 16's in bit j + 16.
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantizeRowQ5_1(const float* x, void* vy, int64_t n) {
  BlockQ5_1* y = static_cast<BlockQ5_1*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    MinMax(x, kQK, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    y[i].m = F32ToF16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[kQK / 2 + j] - min) * id;
      // No clamp here in ggml: (max - min) * id rounds to at most 31.5, so 31 at most.
      const uint8_t q0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint8_t q1 = static_cast<uint8_t>(x1 + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= ((q0 & 0x10u) >> 4) << j;
      qh |= ((q1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

// IQ4_NL as llama-quantize makes it (quantize_iq4_nl with no importance matrix: 7 tries each
// side of the first guess). Weights are x^2, so large values dominate the scale fit.
void QuantizeRowIQ4_NL(const float* x, void* vy, int64_t n) {
  using quant_internal::BestIndexInt8;
  BlockIQ4_NL* y = static_cast<BlockIQ4_NL*>(vy);
  const int8_t* values = kIq4nlValues;
  constexpr int kTries = 7;
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float weight[kQK];
    for (int j = 0; j < kQK; ++j) weight[j] = x[j] * x[j];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    float d = 0.0f;
    if (amax >= 1e-15f) {  // ggml's GROUP_MAX_EPS: below it the block is all zero
      d = -max / values[0];
      float id = 1 / d;
      float sumqx = 0, sumq2 = 0;
      for (int j = 0; j < kQK; ++j) {
        const float q = values[BestIndexInt8(16, values, id * x[j])];
        sumqx += weight[j] * q * x[j];
        sumq2 += weight[j] * q * q;
      }
      d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
      float best = d * sumqx;
      for (int itry = -kTries; itry <= kTries; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < kQK; ++j) {
          const float q = values[BestIndexInt8(16, values, id * x[j])];
          sumqx += weight[j] * q * x[j];
          sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
    }
    y[i].d = F32ToF16(d);
    // The indices are chosen again with the F32 scale (not the stored F16 one), as ggml does.
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint8_t l[kQK];
    for (int j = 0; j < kQK; ++j) l[j] = static_cast<uint8_t>(BestIndexInt8(16, values, id * x[j]));
    for (int j = 0; j < kQK / 2; ++j) y[i].qs[j] = static_cast<uint8_t>(l[j] | (l[j + 16] << 4));
  }
}

namespace {

// ggml stores the exponent as `(uint8_t) f` for a float f = floor(log2(amax)) - 2 + 127, which
// is undefined in C when f < 0 (amax below 2^-125) or f = inf (amax = inf). What llama.cpp's
// x86-64 build does, and what we reproduce: truncate to a 32-bit int (cvttss2si, whose answer
// out of range is INT32_MIN) and keep the low byte. So amax = 2^-130 gives e = 251, a huge
// scale whose every code is 0: the block dequantizes to zeros, as ggml's does.
uint8_t Mxfp4Exponent(float f) {
  if (!(f >= -2147483648.0f && f < 2147483648.0f)) return 0;
  return static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(f)) & 0xFF);
}

// ggml's best_index_mxfp4: the code whose value times d is nearest x, the first on ties (so
// 0 rather than -0), comparing |value * d - x| (value * d is exact: a small integer times a
// power of two).
uint8_t Mxfp4Code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

// MXFP4 as ggml's quantize_row_mxfp4_ref (what llama-quantize writes; it takes no importance
// matrix): the scale 2^(e - 127) with e - 127 = floor(log2 amax) - 2 puts amax / scale in
// [4, 8), so the largest code (6) saturates the block's largest values above 6 x scale; then
// each value takes its nearest code.
void QuantizeRowMXFP4(const float* x, void* vy, int64_t n) {
  BlockMXFP4* y = static_cast<BlockMXFP4*>(vy);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    }
    // log2f, floorf and the float sum exactly as ggml writes them.
    const uint8_t e =
        amax > 0.0f ? Mxfp4Exponent(std::floor(std::log2(amax)) - 2.0f + 127.0f) : uint8_t{0};
    const float d = Mxfp4HalfScale(e);
    y[i].e = e;
    for (int j = 0; j < kQK / 2; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(Mxfp4Code(x[j], d) | (Mxfp4Code(x[j + kQK / 2], d) << 4));
    }
  }
}

}  // namespace textgen
