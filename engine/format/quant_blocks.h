// ggml's quantized block layouts, byte for byte as GGUF stores them (llama.cpp ggml-common.h).
//
// Every struct is packed and holds only byte-sized or uint16 fields, so a pointer into a mapped
// file may be reinterpreted as one of these at any alignment the file gives (GGUF aligns tensor
// starts, not blocks: a Q4_K block of 144 bytes lands at any even offset). F16 fields are raw
// IEEE half bits (convert with F16ToF32). A row of `n` values is n / kBlockSize consecutive
// blocks; blocks never straddle rows.
//
// Values (what the dequantizers in dtype.cc compute, as ggml's dequantize_row_* do):
//   Q4_0   x = d * (q - 8)                q: 4 bits, low nibbles = values 0..15, high = 16..31
//   Q4_1   x = d * q + m
//   Q5_0   x = d * (q - 16)               q: 4 low bits in qs, 5th bit from qh (bit j = value j)
//   Q5_1   x = d * q + m
//   Q8_0   x = d * q                      q: int8
//   Q2_K   x = d * sc * q - dmin * mn     16 sub-blocks of 16, sc/mn 4 bits each, q 2 bits
//   Q3_K   x = d * (sc - 32) * (q - 4*!h) 16 sub-blocks of 16, 6-bit scales, q 2 bits + hmask
//   Q4_K   x = d * sc * q - dmin * mn     8 sub-blocks of 32, 6-bit sc/mn packed in 12 bytes
//   Q5_K   as Q4_K with a 5th bit from qh
//   Q6_K   x = d * sc * (q - 32)          16 sub-blocks of 16, int8 sc, q 4 bits + 2 high bits
//   IQ4_NL x = d * kIq4nlValues[q]        q: 4-bit index into a non-linear table
//   IQ4_XS as IQ4_NL in 8 sub-blocks of 32 with 6-bit scales (sc - 32) and one F16 d
//   MXFP4  x = Mxfp4HalfScale(e) * kMxfp4Values[q]   e: E8M0 byte (2^(e - 127)); q: 4-bit E2M1
//          code, low nibbles = values 0..15, high = 16..31 (the OCP MX format, block of 32)
//   Q8_K   (activations only) x = d * q, d F32; bsums = sums of 16 consecutive q
#ifndef TEXTGEN_ENGINE_FORMAT_QUANT_BLOCKS_H_
#define TEXTGEN_ENGINE_FORMAT_QUANT_BLOCKS_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace textgen {

inline constexpr int kQkSmall = 32;  // values per block of Q4_0 ... Q8_0 and IQ4_NL
inline constexpr int kQkK = 256;     // values per super-block of the K-quants and IQ4_XS
inline constexpr int kKScaleBytes = 12;

#pragma pack(push, 1)

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQkSmall / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQkSmall / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // 5th bit of value j at bit j (little-endian uint32)
  uint8_t qs[kQkSmall / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQkSmall / 2];
};
struct BlockQ8_0Format {  // named apart from ops::BlockQ8_0 (same bytes) until the two merge
  uint16_t d;
  int8_t qs[kQkSmall];
};
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];  // low nibble scale, high nibble min, per 16 values
  uint8_t qs[kQkK / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[kKScaleBytes];  // 16 6-bit scales
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];  // 8 6-bit scales and 8 6-bit mins
  uint8_t qs[kQkK / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQkSmall / 2];
};
struct BlockMXFP4 {
  uint8_t e;  // E8M0 shared exponent: the block's scale is 2^(e - 127)
  uint8_t qs[kQkSmall / 2];
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;  // high 2 bits of the 8 6-bit scales
  uint8_t scales_l[kQkK / 64];
  uint8_t qs[kQkK / 2];
};
// Activations quantized for the K-quant dot products (never stored in GGUF files here).
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];
};

#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0Format) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ8_K) == 292);

// IQ4_NL / IQ4_XS: the 16 values a 4-bit index selects (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4: the E2M1 values of the 16 codes, doubled so that they are integers (ggml's
// kvalues_mxfp4: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2; code 8 is -0, which
// ggml stores as 0). Mxfp4HalfScale compensates: value = kMxfp4Values[q] * 2^(e - 128).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4: half the block scale, 2^(e - 128), as an F32 (ggml's ggml_e8m0_to_fp32_half): e = 0
// and 1 give the subnormals 2^-128 and 2^-127; e = 255 gives 2^127 (ggml does not treat E8M0's
// NaN code specially, and neither do we: the value is what its dequantizer computes). A table,
// so the kernels pay one load per block and no branch. Note e = 0 is what an all-zero block
// gets: its subnormal scale makes the kernels' products subnormal, which x86 computes slowly
// (with every 13th block so, a 2880 x 2880 decode GEMV took 1.5x as long on an AVX2 EPYC).
inline constexpr std::array<float, 256> kMxfp4HalfScales = [] {
  std::array<float, 256> t{};
  for (uint32_t e = 0; e < 256; ++e) {
    t[e] = std::bit_cast<float>(e < 2 ? uint32_t{0x00200000} << e : (e - 1) << 23);
  }
  return t;
}();
inline float Mxfp4HalfScale(uint8_t e) { return kMxfp4HalfScales[e]; }

// Q3_K: the 16 6-bit scales (0..63, value sc - 32) from the 12 packed bytes (ggml's
// dequantize_row_q3_K: low 4 bits in bytes 0-7, high 2 bits in bytes 8-11).
inline void Q3KScaleBits(const uint8_t* packed, int8_t sc[16]) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(sc, aux, 16);
}

// IQ4_XS: the 6-bit scale of sub-block ib (0..7), stored biased by 32 (the scale is ls - 32):
// the low 4 bits in nibble ib % 2 of scales_l[ib / 2], the high 2 in bits 2 ib of scales_h.
inline int IQ4XSScaleBits(const BlockIQ4_XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes
// (ggml's get_scale_min_k4): j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split
// into a low nibble of byte j + 4 and the top 2 bits of bytes j - 4 and j.
inline void KScaleMin(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_QUANT_BLOCKS_H_
