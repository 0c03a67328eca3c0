#include "engine/ops/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops::internal {
TG_ISA_BEGIN
namespace {

// The kernels are templates over the cached element type T: float, or uint16_t holding BF16
// bit patterns. BF16 is widened to F32 as it is loaded (exact: the F32 with the same high
// half), so both types share every F32 operation in the same order, and the float
// instantiation is the F32 kernel as it was.
inline float ToF32(float x) { return x; }
inline float ToF32(uint16_t x) { return half::Bf16ToF32(x); }

// The accumulator sets of WeightedSum per chunk of G <= 4 query heads: V rows of a block go
// round-robin to the sets (the rows left over to set 0), which are added in set order at the
// end. The count depends on G and the head dim only, never on the level, so each output dim
// is the same sum in the same order whatever the vector width (issue #32); small head dims
// take twice as many so a chunk still has enough independent FMA chains.
template <int G>
constexpr int kSumSets = G == 1 ? 4 : (G == 2 ? 2 : 1);
constexpr int64_t kSmallHeadDim = 8;
inline int SumSets(int64_t g, int64_t hd) {
  const int sets = g == 1 ? 4 : (g == 2 ? 2 : 1);
  return hd <= kSmallHeadDim ? 2 * sets : sets;
}

#if defined(__AVX512F__)

// WeightedSum's dims per vector and vectors per chunk (kChunkVectors x 4 heads accumulators).
constexpr int64_t kLanes = 16;
constexpr int64_t kChunkVectors = 4;

// 16 consecutive elements from p as F32; lanes outside `mask` are 0 and not read.
inline __m512 Load16(const float* p, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, p); }
inline __m512 Load16(const uint16_t* p, __mmask16 mask) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  const __m256i h = _mm256_maskz_loadu_epi16(mask, p);
#else
  // No 16-bit masked loads: gather the lanes through a small buffer.
  alignas(32) uint16_t buf[16] = {};
  for (int i = 0; i < 16; ++i) {
    if (mask >> i & 1) buf[i] = p[i];
  }
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
#endif
  // BF16 -> F32 is a 16-bit left shift of the bits (what VCVTPBH2PS would do).
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Up to 16 consecutive slots of one K^T tile: lane i is slot t + i, read at kt[d * bs + i].
template <typename T>
struct ScoreChunk {
  const T* kt;
  __mmask16 mask;  // lanes holding real slots; 0 for padding chunks (nothing read or written)
  int64_t t;
};

// s[g * lds + c.t + i] = scale * sum_d q[g * hd + d] * c.kt[d * bs + i] for the C chunks and
// G query heads, and vmax[g] = max(vmax[g], those scores). The C x G accumulators stay in
// registers over the head dim, so each K^T row segment is loaded once for the whole group,
// and C * G independent FMA chains hide the FMA latency even for head_dim 8.
template <int G, int C, typename T>
inline void ScoreChunks(const ScoreChunk<T>* c, const float* q, int64_t hd, int64_t bs, float scale,
                        float* s, int64_t lds, __m512* vmax) {
  __m512 acc[C][G];
  TG_UNROLL
  for (int j = 0; j < C; ++j) {
    TG_UNROLL
    for (int g = 0; g < G; ++g) acc[j][g] = _mm512_setzero_ps();
  }
  for (int64_t d = 0; d < hd; ++d) {
    __m512 k[C];
    TG_UNROLL
    for (int j = 0; j < C; ++j) k[j] = Load16(c[j].kt + d * bs, c[j].mask);
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m512 qd = _mm512_set1_ps(q[g * hd + d]);
      TG_UNROLL
      for (int j = 0; j < C; ++j) acc[j][g] = _mm512_fmadd_ps(qd, k[j], acc[j][g]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  TG_UNROLL
  for (int j = 0; j < C; ++j) {
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m512 v = _mm512_mul_ps(acc[j][g], vscale);
      _mm512_mask_storeu_ps(s + g * lds + c[j].t, c[j].mask, v);
      // The running maximum goes second so NaN scores are skipped, as in simd::Max.
      vmax[g] = _mm512_mask_max_ps(vmax[g], c[j].mask, v, vmax[g]);
    }
  }
}

// Scaled scores s[g * lds + t], t < n_ctx, of G query heads q [G, hd] against the K^T tiles
// (kv head at `offset` in each block), and their maxima max[g]. Slots are taken 16 at a time
// per tile column range; C such chunks, possibly from different blocks, go through
// ScoreChunks together.
template <int G, typename T>
void Scores(const float* q, int64_t hd, const T* const* k_blocks, int64_t offset, int64_t bs,
            int64_t n_ctx, float scale, float* s, int64_t lds, float* max) {
  // Enough chunks for >= 8 independent accumulators; at most 16 + C + 1 zmm registers live.
  constexpr int C = G == 1 ? 8 : 4;
  __m512 vmax[G];
  TG_UNROLL
  for (int g = 0; g < G; ++g) vmax[g] = _mm512_set1_ps(-INFINITY);
  ScoreChunk<T> chunks[C];
  int nc = 0;
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const int64_t rows = std::min(bs, n_ctx - t);
    const T* kt = k_blocks[b] + offset;
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
      chunks[nc++] = {kt + r0, simd::TailMask(rows - r0), t + r0};
      if (nc == C) {
        ScoreChunks<G, C>(chunks, q, hd, bs, scale, s, lds, vmax);
        nc = 0;
      }
    }
    t += rows;
  }
  if (nc > 0) {
    for (int j = nc; j < C; ++j) chunks[j] = {chunks[0].kt, 0, 0};
    ScoreChunks<G, C>(chunks, q, hd, bs, scale, s, lds, vmax);
  }
  TG_UNROLL
  for (int g = 0; g < G; ++g) max[g] = _mm512_reduce_max_ps(vmax[g]);
}

// out[g, d0 + i] = sum_t p[g * ldp + t] * V[t, d0 + i] for g < G, i < 16 * NV (masked at hd),
// over slots t < n_ctx of the blocks. The U x G x NV output vectors stay in registers for the
// whole context, so each V row is loaded once and nothing is stored until the end; rows go
// round-robin to U accumulator sets so small G * NV (head_dim 8/16) is not bound by the FMA
// latency of a single chain.
template <int G, int NV, int U, typename T>
void WeightedSumV(const float* p, int64_t ldp, const T* const* v_blocks, int64_t offset, int64_t bs,
                  int64_t n_ctx, int64_t hd, int64_t d0, float* out) {
  __mmask16 mask[NV];
  TG_UNROLL
  for (int i = 0; i < NV; ++i) {
    mask[i] = simd::TailMask(std::max<int64_t>(0, hd - d0 - 16 * i));
  }
  __m512 acc[U][G][NV];
  TG_UNROLL
  for (int u = 0; u < U; ++u) {
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      TG_UNROLL
      for (int i = 0; i < NV; ++i) acc[u][g][i] = _mm512_setzero_ps();
    }
  }
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const T* v = v_blocks[b] + offset + d0;
    const int64_t rows = std::min(bs, n_ctx - t);
    int64_t r = 0;
    for (; r + U <= rows; r += U, t += U) {
      TG_UNROLL
      for (int u = 0; u < U; ++u) {
        __m512 vv[NV];
        TG_UNROLL
        for (int i = 0; i < NV; ++i) {
          vv[i] = Load16(v + (r + u) * hd + 16 * i, mask[i]);
        }
        TG_UNROLL
        for (int g = 0; g < G; ++g) {
          const __m512 pg = _mm512_set1_ps(p[g * ldp + t + u]);
          TG_UNROLL
          for (int i = 0; i < NV; ++i) acc[u][g][i] = _mm512_fmadd_ps(pg, vv[i], acc[u][g][i]);
        }
      }
    }
    for (; r < rows; ++r, ++t) {
      __m512 vv[NV];
      TG_UNROLL
      for (int i = 0; i < NV; ++i) vv[i] = Load16(v + r * hd + 16 * i, mask[i]);
      TG_UNROLL
      for (int g = 0; g < G; ++g) {
        const __m512 pg = _mm512_set1_ps(p[g * ldp + t]);
        TG_UNROLL
        for (int i = 0; i < NV; ++i) acc[0][g][i] = _mm512_fmadd_ps(pg, vv[i], acc[0][g][i]);
      }
    }
  }
  TG_UNROLL
  for (int g = 0; g < G; ++g) {
    TG_UNROLL
    for (int i = 0; i < NV; ++i) {
      __m512 sum = acc[0][g][i];
      TG_UNROLL
      for (int u = 1; u < U; ++u) sum = _mm512_add_ps(sum, acc[u][g][i]);
      _mm512_mask_storeu_ps(out + g * hd + d0 + 16 * i, mask[i], sum);
    }
  }
}

template <int G, typename T>
void WeightedSumVChunk(int nv, const float* p, int64_t ldp, const T* const* v_blocks,
                       int64_t offset, int64_t bs, int64_t n_ctx, int64_t hd, int64_t d0,
                       float* out) {
  // kSumSets<G> sets x G x NV <= 16 accumulators (32 zmm registers).
  constexpr int kU = kSumSets<G>;
  if (hd <= kSmallHeadDim) {
    return WeightedSumV<G, 1, 2 * kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
  }
  switch (nv) {
    case 1:
      return WeightedSumV<G, 1, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    case 2:
      return WeightedSumV<G, 2, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    case 3:
      return WeightedSumV<G, 3, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    default:
      return WeightedSumV<G, 4, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
  }
}
#undef TG_UNROLL
#elif defined(TG_SIMD_AVX2)
// The AVX2 (x86-64-v3) forms of the kernels above: the same loops and arithmetic on 8-lane
// vectors, with tile sizes cut for 16 ymm registers. Without mask registers a partial vector
// is read with _mm256_maskload_ps (F32) or through a zero-padded buffer (BF16), so nothing
// past the valid lanes is read, and written with _mm256_maskstore_ps.

constexpr int64_t kLanes = 8;
constexpr int64_t kChunkVectors = 2;

// The first `n` in [0, 8] elements at p as F32, the other lanes 0.
inline __m256 Load8(const float* p, int64_t n) {
  return n == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, simd::TailMask8(n));
}
inline __m256 Load8(const uint16_t* p, int64_t n) {
  return n == 8 ? simd::LoadBf16(p) : simd::WidenBf16(simd::LoadU16Tail(p, n));
}

template <typename T>
struct ScoreChunk8 {
  const T* kt;
  int64_t n;  // lanes holding real slots, 0..8; 0 for padding chunks (nothing read or written)
  int64_t t;
};

template <int G, int C, typename T>
inline void ScoreChunks8(const ScoreChunk8<T>* c, const float* q, int64_t hd, int64_t bs,
                         float scale, float* s, int64_t lds, __m256* vmax) {
  __m256 acc[C][G];
  TG_UNROLL
  for (int j = 0; j < C; ++j) {
    TG_UNROLL
    for (int g = 0; g < G; ++g) acc[j][g] = _mm256_setzero_ps();
  }
  for (int64_t d = 0; d < hd; ++d) {
    TG_UNROLL
    for (int j = 0; j < C; ++j) {
      const __m256 k = Load8(c[j].kt + d * bs, c[j].n);
      TG_UNROLL
      for (int g = 0; g < G; ++g) {
        acc[j][g] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + g * hd + d), k, acc[j][g]);
      }
    }
  }
  const __m256 vscale = _mm256_set1_ps(scale);
  TG_UNROLL
  for (int j = 0; j < C; ++j) {
    const __m256i m = simd::TailMask8(c[j].n);
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m256 v = _mm256_mul_ps(acc[j][g], vscale);
      _mm256_maskstore_ps(s + g * lds + c[j].t, m, v);
      // Lanes outside the chunk keep vmax; the running maximum goes second (NaN skipped).
      const __m256 vm = _mm256_blendv_ps(vmax[g], v, _mm256_castsi256_ps(m));
      vmax[g] = _mm256_max_ps(vm, vmax[g]);
    }
  }
}

template <int G, typename T>
void Scores(const float* q, int64_t hd, const T* const* k_blocks, int64_t offset, int64_t bs,
            int64_t n_ctx, float scale, float* s, int64_t lds, float* max) {
  // C * G accumulators + C key vectors within 16 registers, >= 6 independent chains.
  constexpr int C = G == 1 ? 8 : (G == 2 ? 4 : 2);
  __m256 vmax[G];
  TG_UNROLL
  for (int g = 0; g < G; ++g) vmax[g] = _mm256_set1_ps(-INFINITY);
  ScoreChunk8<T> chunks[C];
  int nc = 0;
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const int64_t rows = std::min(bs, n_ctx - t);
    const T* kt = k_blocks[b] + offset;
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      chunks[nc++] = {kt + r0, std::min<int64_t>(8, rows - r0), t + r0};
      if (nc == C) {
        ScoreChunks8<G, C>(chunks, q, hd, bs, scale, s, lds, vmax);
        nc = 0;
      }
    }
    t += rows;
  }
  if (nc > 0) {
    for (int j = nc; j < C; ++j) chunks[j] = {chunks[0].kt, 0, 0};
    ScoreChunks8<G, C>(chunks, q, hd, bs, scale, s, lds, vmax);
  }
  TG_UNROLL
  for (int g = 0; g < G; ++g) max[g] = simd::ReduceMax(vmax[g]);
}

// out[g, d0 + i] = sum_t p[g * ldp + t] * V[t, d0 + i] for g < G, i < 8 * NV (cut at hd), U
// accumulator sets taking the rows round-robin, as WeightedSumV.
template <int G, int NV, int U, typename T>
void WeightedSumV(const float* p, int64_t ldp, const T* const* v_blocks, int64_t offset, int64_t bs,
                  int64_t n_ctx, int64_t hd, int64_t d0, float* out) {
  int64_t lanes[NV];
  TG_UNROLL
  for (int i = 0; i < NV; ++i) lanes[i] = std::clamp<int64_t>(hd - d0 - 8 * i, 0, 8);
  __m256 acc[U][G][NV];
  TG_UNROLL
  for (int u = 0; u < U; ++u) {
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      TG_UNROLL
      for (int i = 0; i < NV; ++i) acc[u][g][i] = _mm256_setzero_ps();
    }
  }
  auto row = [&](const T* v, int64_t t, int u) {
    __m256 vv[NV];
    TG_UNROLL
    for (int i = 0; i < NV; ++i) vv[i] = Load8(v + 8 * i, lanes[i]);
    TG_UNROLL
    for (int g = 0; g < G; ++g) {
      const __m256 pg = _mm256_broadcast_ss(p + g * ldp + t);
      TG_UNROLL
      for (int i = 0; i < NV; ++i) acc[u][g][i] = _mm256_fmadd_ps(pg, vv[i], acc[u][g][i]);
    }
  };
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const T* v = v_blocks[b] + offset + d0;
    const int64_t rows = std::min(bs, n_ctx - t);
    int64_t r = 0;
    for (; r + U <= rows; r += U, t += U) {
      TG_UNROLL
      for (int u = 0; u < U; ++u) row(v + (r + u) * hd, t + u, u);
    }
    for (; r < rows; ++r, ++t) row(v + r * hd, t, 0);
  }
  TG_UNROLL
  for (int g = 0; g < G; ++g) {
    TG_UNROLL
    for (int i = 0; i < NV; ++i) {
      __m256 sum = acc[0][g][i];
      TG_UNROLL
      for (int u = 1; u < U; ++u) sum = _mm256_add_ps(sum, acc[u][g][i]);
      _mm256_maskstore_ps(out + g * hd + d0 + 8 * i, simd::TailMask8(lanes[i]), sum);
    }
  }
}

// Up to 16 dims of up to G query heads: kSumSets<G> * G * NV <= 8 accumulators.
template <int G, typename T>
void WeightedSumVChunk(int nv, const float* p, int64_t ldp, const T* const* v_blocks,
                       int64_t offset, int64_t bs, int64_t n_ctx, int64_t hd, int64_t d0,
                       float* out) {
  constexpr int kU = kSumSets<G>;
  if (hd <= kSmallHeadDim) {
    return WeightedSumV<G, 1, 2 * kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
  }
  if (nv == 1) return WeightedSumV<G, 1, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
  WeightedSumV<G, 2, kU>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
}
#undef TG_UNROLL
#endif

// ---- Scalar forms: the portable kernel (and the native one without a vector unit) ----------
// They state the one order every level computes (issue #32): a score is the FMA chain over
// the head dim in order, then one multiply by the scale; an output dim is kSumSets' sets of
// FMA chains over the context, added in set order.

template <typename T>
void ScoreRowsScalar(const float* q, int64_t group, int64_t hd, const T* const* k_blocks,
                     int64_t offset, int64_t bs, int64_t n_ctx, float scale, float* s, float* max) {
  for (int64_t g = 0; g < group; ++g) {
    float* sg = s + g * n_ctx;
    for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
      const int64_t rows = std::min(bs, n_ctx - t);
      const T* kt = k_blocks[b] + offset;
      for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.0f;
        for (int64_t d = 0; d < hd; ++d) acc = std::fma(q[g * hd + d], ToF32(kt[d * bs + r]), acc);
        sg[t + r] = acc * scale;
      }
      t += rows;
    }
    max[g] = simd::Max<simd::Portable>(sg, n_ctx);
  }
}

template <typename T>
void WeightedSumScalar(const float* p, int64_t group, int64_t n_ctx, const T* const* v_blocks,
                       int64_t offset, int64_t bs, int64_t hd, float* out) {
  for (int64_t g = 0; g < group; ++g) {
    const int sets = SumSets(std::min<int64_t>(4, group - g / 4 * 4), hd);
    const float* pg = p + g * n_ctx;
    for (int64_t d = 0; d < hd; ++d) {
      float acc[8] = {};
      for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
        const T* v = v_blocks[b] + offset + d;
        const int64_t rows = std::min(bs, n_ctx - t);
        int64_t r = 0;
        for (; r + sets <= rows; r += sets, t += sets) {
          for (int u = 0; u < sets; ++u) {
            acc[u] = std::fma(pg[t + u], ToF32(v[(r + u) * hd]), acc[u]);
          }
        }
        for (; r < rows; ++r, ++t) acc[0] = std::fma(pg[t], ToF32(v[r * hd]), acc[0]);
      }
      float sum = acc[0];
      for (int u = 1; u < sets; ++u) sum = sum + acc[u];
      out[g * hd + d] = sum;
    }
  }
}

// ---- The level's forms ----------------------------------------------------------------------

// s[g * n_ctx + t] = scale * q[g] · K[t] for g < group over the K^T tiles, max[g] the row
// maxima (the same values as simd::Max of the rows, up to the sign of a zero maximum, which
// exp(s - max) does not see).
template <typename T>
void ScoreRows(const float* q, int64_t group, int64_t hd, const T* const* k_blocks, int64_t offset,
               int64_t bs, int64_t n_ctx, float scale, float* s, float* max) {
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  // Chunks of up to 4 query heads: each reads the K^T tiles once.
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const float* qg = q + g0 * hd;
    float* sg = s + g0 * n_ctx;
    switch (std::min<int64_t>(4, group - g0)) {
      case 1:
        Scores<1>(qg, hd, k_blocks, offset, bs, n_ctx, scale, sg, n_ctx, max + g0);
        break;
      case 2:
        Scores<2>(qg, hd, k_blocks, offset, bs, n_ctx, scale, sg, n_ctx, max + g0);
        break;
      case 3:
        Scores<3>(qg, hd, k_blocks, offset, bs, n_ctx, scale, sg, n_ctx, max + g0);
        break;
      default:
        Scores<4>(qg, hd, k_blocks, offset, bs, n_ctx, scale, sg, n_ctx, max + g0);
        break;
    }
  }
#else
  ScoreRowsScalar(q, group, hd, k_blocks, offset, bs, n_ctx, scale, s, max);
#endif
}

// out[group, hd] = P[group, n_ctx] · V over the blocks (kv head at `offset` in each block).
template <typename T>
void WeightedSum(const float* p, int64_t group, int64_t n_ctx, const T* const* v_blocks,
                 int64_t offset, int64_t bs, int64_t hd, float* out) {
#if defined(__AVX512F__) || defined(TG_SIMD_AVX2)
  // Chunks of up to 4 query heads x kChunkVectors vectors of dims: at most 16 (AVX-512) or 8
  // (AVX2) accumulators.
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const int64_t gn = std::min<int64_t>(4, group - g0);
    const float* pg = p + g0 * n_ctx;
    float* og = out + g0 * hd;
    for (int64_t d0 = 0; d0 < hd; d0 += kChunkVectors * kLanes) {
      const int nv =
          static_cast<int>(std::min<int64_t>(kChunkVectors, (hd - d0 + kLanes - 1) / kLanes));
      switch (gn) {
        case 1:
          WeightedSumVChunk<1>(nv, pg, n_ctx, v_blocks, offset, bs, n_ctx, hd, d0, og);
          break;
        case 2:
          WeightedSumVChunk<2>(nv, pg, n_ctx, v_blocks, offset, bs, n_ctx, hd, d0, og);
          break;
        case 3:
          WeightedSumVChunk<3>(nv, pg, n_ctx, v_blocks, offset, bs, n_ctx, hd, d0, og);
          break;
        default:
          WeightedSumVChunk<4>(nv, pg, n_ctx, v_blocks, offset, bs, n_ctx, hd, d0, og);
          break;
      }
    }
  }
#else
  WeightedSumScalar(p, group, n_ctx, v_blocks, offset, bs, hd, out);
#endif
}

// The attention of kv heads [kv_begin, kv_end): Isa = Native runs the level's kernels, Isa =
// Portable the scalar forms; both give the same bytes.
template <typename Isa, typename T>
void Attend(const AttentionShape& shape, const float* q, const T* const* k_blocks,
            const T* const* v_blocks, int64_t n_ctx, float* out, int64_t start, int64_t kv_begin,
            int64_t kv_end) {
  constexpr bool kPortable = std::is_same_v<Isa, simd::Portable>;
  const int64_t hd = shape.head_dim;
  const int64_t bs = shape.block_size;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const float scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // A window skips the blocks wholly before `start`; the kernels below then see a context of
  // `n` slots from block b0 on, whose first `masked` slots lie before the window.
  const int64_t b0 = start / bs;
  const int64_t masked = start - b0 * bs;
  const int64_t n = n_ctx - b0 * bs;
  k_blocks += b0;
  v_blocks += b0;
  // scores [group, n], max [group]: the query heads sharing a kv head are done together so
  // each K/V tile is read once per kv head (per 4 query heads).
  thread_local std::vector<float> scores;
  thread_local std::vector<float> max;
  scores.resize(static_cast<size_t>(group * n));
  max.resize(static_cast<size_t>(group));

  for (int64_t h = kv_begin; h < kv_end; ++h) {
    // Both tiles of kv head h start here: K^T [hd, bs] and V [bs, hd] have the same size.
    const int64_t offset = h * bs * hd;
    if constexpr (kPortable) {
      ScoreRowsScalar(q + h * group * hd, group, hd, k_blocks, offset, bs, n, scale, scores.data(),
                      max.data());
    } else {
      ScoreRows(q + h * group * hd, group, hd, k_blocks, offset, bs, n, scale, scores.data(),
                max.data());
    }
    for (int64_t g = 0; g < group; ++g) {
      float* s = scores.data() + g * n;
      // Soft-capping and the window's leading slots are rare (Gemma) and cheap next to the
      // scores: done here on the scores row, so every kernel path (AVX-512, AVX2, scalar)
      // shares them, then the maximum is taken again.
      if (shape.softcap > 0.0f || masked > 0) {
        if (shape.softcap > 0.0f) {
          const float cap = shape.softcap;
          for (int64_t t = masked; t < n; ++t) s[t] = cap * std::tanh(s[t] / cap);
        }
        std::fill(s, s + masked, -INFINITY);
        max[g] = simd::Max<Isa>(s + masked, n - masked);
      }
      // A sink joins the maximum and the denominator, as ggml's soft_max with sinks: one
      // scalar exp, the same at every level.
      const float sink = shape.sinks != nullptr ? shape.sinks[h * group + g] : -INFINITY;
      const float m = shape.sinks != nullptr ? std::max(max[g], sink) : max[g];
      double sum = simd::ExpShiftSum<Isa>(s, n, m);
      if (shape.sinks != nullptr) sum += static_cast<double>(std::exp(sink - m));
      // Normalize the probabilities rather than the output: out is then a convex combination
      // of V rows, as in the reference.
      simd::Scale<Isa>(s, n, static_cast<float>(1.0 / sum));
    }
    if constexpr (kPortable) {
      WeightedSumScalar(scores.data(), group, n, v_blocks, offset, bs, hd, out + h * group * hd);
    } else {
      WeightedSum(scores.data(), group, n, v_blocks, offset, bs, hd, out + h * group * hd);
    }
  }
}

}  // namespace

void PagedAttentionKernel(const AttentionShape& shape, const float* q, const float* const* k_blocks,
                          const float* const* v_blocks, int64_t n_ctx, float* out, int64_t start,
                          int64_t kv_begin, int64_t kv_end) {
  Attend<simd::Native>(shape, q, k_blocks, v_blocks, n_ctx, out, start, kv_begin, kv_end);
}

void PagedAttentionKernel(const AttentionShape& shape, const float* q,
                          const uint16_t* const* k_blocks, const uint16_t* const* v_blocks,
                          int64_t n_ctx, float* out, int64_t start, int64_t kv_begin,
                          int64_t kv_end) {
  Attend<simd::Native>(shape, q, k_blocks, v_blocks, n_ctx, out, start, kv_begin, kv_end);
}

namespace portable {

void PagedAttentionKernel(const AttentionShape& shape, const float* q, const float* const* k_blocks,
                          const float* const* v_blocks, int64_t n_ctx, float* out, int64_t start,
                          int64_t kv_begin, int64_t kv_end) {
  Attend<simd::Portable>(shape, q, k_blocks, v_blocks, n_ctx, out, start, kv_begin, kv_end);
}

void PagedAttentionKernel(const AttentionShape& shape, const float* q,
                          const uint16_t* const* k_blocks, const uint16_t* const* v_blocks,
                          int64_t n_ctx, float* out, int64_t start, int64_t kv_begin,
                          int64_t kv_end) {
  Attend<simd::Portable>(shape, q, k_blocks, v_blocks, n_ctx, out, start, kv_begin, kv_end);
}

}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops::internal
