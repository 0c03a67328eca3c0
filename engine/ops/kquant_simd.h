// Pieces shared by the int8 K-quant kernels (engine/ops/kquant_dot.cc, kquant_dot_more.cc,
// kquant_tiles_avx2.cc): the Q4_K / Q5_K scale unpacking, the weight prefetch and the u8 x s8
// multiply-add.
#ifndef TEXTGEN_ENGINE_OPS_KQUANT_SIMD_H_
#define TEXTGEN_ENGINE_OPS_KQUANT_SIMD_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

// The levels with 512-bit K-quant tiles (engine/ops/kquant_dot.cc); below them the 256-bit
// ones of kquant_tiles_avx2.cc.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define TG_KQUANT_512 1
#endif

#if defined(__AVX2__)
#include <immintrin.h>

namespace textgen::ops {
TG_ISA_BEGIN

// Q4_K's 8 scales and 8 mins (6 bits each) from the 12 packed bytes, as 16 uint16 words (0-7
// the scales, 8-15 the mins): ggml's get_scale_min_k4 for all j at once, on the 32-bit words
// u0 u1 u2 of the packing (sc 0-3 = u0 & 0x3f.., mn 0-3 = u1 & 0x3f.., sc 4-7 = u2 low nibbles
// | u0 top bits, mn 4-7 = u2 high nibbles | u1 top bits). Reads 16 bytes: the 12 and the first
// 4 of qs.
inline __m256i Q4KScaleWords(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  constexpr int k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2x4 = 0x30303030;
  __m128i lo = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  lo =
      _mm_and_si128(_mm_srlv_epi32(lo, _mm_setr_epi32(0, 0, 0, 4)), _mm_setr_epi32(k6, k4, k6, k4));
  __m128i hi = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  hi = _mm_and_si128(_mm_srli_epi32(hi, 2), _mm_setr_epi32(0, k2x4, 0, k2x4));
  return _mm256_cvtepu8_epi16(_mm_or_si128(lo, hi));
}

// Software prefetch for tiles of NR contiguous weight rows (one address range): each
// super-block step b prefetches as many bytes as it consumes, at least kPrefetchBytes (or one
// tile) ahead, as engine/ops/q8_0_gemv.cc does for its short rows (a 768-wide Q4_K row is 432
// bytes, too short a stream for the hardware prefetcher). Measured on 4096-wide rows streamed
// from DRAM (ops-bench --kquant, one thread, Ice Lake VM), once the prefetches were really
// emitted: AVX-512 Q4_K 4 activation rows 5-5.5 -> 7.2 GB/s, Q6_K one row 8.3-8.6 -> 11 GB/s;
// stories110M Q4_K_M greedy decode 6.0 -> 4.8 ms/token.
constexpr int64_t kPrefetchBytes = 4096;

// always_inline: as a separate function GCC 12 finds it free of side effects (a prefetch is no
// memory access to it) and deletes the calls; every K-quant prefetch was silently gone so.
template <int NR, size_t kBlockBytes>
[[gnu::always_inline]] inline void Prefetch(const uint8_t* w0, size_t row_bytes, int64_t b) {
  const int64_t ahead = std::max<int64_t>(kPrefetchBytes, NR * static_cast<int64_t>(row_bytes));
  const char* p = reinterpret_cast<const char*>(w0) + ahead + b * NR * int64_t{kBlockBytes};
  TG_UNROLL
  for (int line = 0; line < static_cast<int>(NR * kBlockBytes); line += 64) {
    _mm_prefetch(p + line, _MM_HINT_T0);
  }
}

// Sum of u8 x s8 products in pairs (int16: the callers keep |u8 x s8| pairs below 32768, so
// maddubs never saturates), times the int16 scales, added to int32 lanes: VNNI's dpwssd where
// the level has it (a Skylake-X-class avx512 level has not).
inline __m256i MulAddU8S8(__m256i acc, __m256i u8, __m256i s8, __m256i scale16) {
  const __m256i p = _mm256_maddubs_epi16(u8, s8);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p, scale16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, scale16));
#endif
}

TG_ISA_END
}  // namespace textgen::ops

#endif  // __AVX2__
#endif  // TEXTGEN_ENGINE_OPS_KQUANT_SIMD_H_
