// ggml's dequantize_row_<type> for every block format, as header-only templates shared by the
// format room's reference dequantizer (engine/format/dequantize.cc, ToF32) and the ops room's
// scalar decoders (engine/ops/quant_decode.cc): the two rooms do not link each other, and one
// copy of the arithmetic keeps them bit-identical. H is the exact F16 -> F32 conversion of the
// includer's room. Include only from files compiled with -ffp-contract=off (engine/CMakeLists.txt):
// ggml's values round `d * q - m` twice, and a contracted multiply-add would differ in the last
// bit.
#ifndef TEXTGEN_ENGINE_FORMAT_QUANT_DEQUANTIZE_INL_H_
#define TEXTGEN_ENGINE_FORMAT_QUANT_DEQUANTIZE_INL_H_

#include <cstdint>
#include <cstring>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"

namespace textgen::quant_ref {
TG_ISA_BEGIN

template <float (*H)(uint16_t)>
inline void Q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = H(x[i].d);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = H(x[i].d), m = H(x[i].m);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

template <typename Block>
inline uint32_t HighBits(const Block& b) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  return qh;
}

template <float (*H)(uint16_t)>
inline void Q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = H(x[i].d);
    const uint32_t qh = HighBits(x[i]);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = H(x[i].d), m = H(x[i].m);
    const uint32_t qh = HighBits(x[i]);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQkK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {  // 16 values from q[0..15], then q[16..31]
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
          }
        }
      }
    }
  }
}

// Q3_K's 16 6-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2 bits in 8..11.
inline void Q3Scales(const uint8_t* packed, int8_t* scales) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>(lo | (hi << 4));
  }
}

template <float (*H)(uint16_t)>
inline void Q3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = H(x[i].d);
    int8_t scales[16];
    Q3Scales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQkK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, mn;
      KScaleMin(is, x[i].scales, &sc, &mn);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
      KScaleMin(is + 1, x[i].scales, &sc, &mn);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d), dmin = H(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, mn;
      KScaleMin(is, x[i].scales, &sc, &mn);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
      KScaleMin(is + 1, x[i].scales, &sc, &mn);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      }
    }
  }
}

template <float (*H)(uint16_t)>
inline void Q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQkK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        // (d * sc) * q, left to right as in ggml.
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

template <float (*H)(uint16_t)>
inline void IQ4_NL(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = H(x[i].d);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

template <float (*H)(uint16_t)>
inline void IQ4_XS(const BlockIQ4_XS* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < kQkK / 32; ++ib, y += 32, qs += 16) {
      const int ls = IQ4XSScaleBits(x[i], ib);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

// No F16 field: MXFP4's scale is the E8M0 byte (Mxfp4HalfScale, half the scale, with the
// doubled table), so no H parameter.
inline void MXFP4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkSmall) {
    const float d = Mxfp4HalfScale(x[i].e);
    for (int j = 0; j < kQkSmall / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[x[i].qs[j] & 0xF]) * d;
      y[j + 16] = static_cast<float>(kMxfp4Values[x[i].qs[j] >> 4]) * d;
    }
  }
}

TG_ISA_END
}  // namespace textgen::quant_ref

#endif  // TEXTGEN_ENGINE_FORMAT_QUANT_DEQUANTIZE_INL_H_
