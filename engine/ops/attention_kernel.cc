#include "engine/ops/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/direct_matmul.h"
#include "engine/ops/simd.h"

namespace textgen::ops::internal {
namespace {

#if defined(__AVX512F__)
// out[g, d0 + i] = sum_t p[g * ldp + t] * V[t, d0 + i] for g < G, i < 16 * NV (masked at hd),
// over slots t < n_ctx of the blocks. The G x NV output vectors stay in registers for the
// whole context, so each V row is loaded once and nothing is stored until the end.
template <int G, int NV>
void WeightedSumV(const float* p, int64_t ldp, const float* const* v_blocks, int64_t offset,
                  int64_t bs, int64_t n_ctx, int64_t hd, int64_t d0, float* out) {
  __mmask16 mask[NV];
  for (int i = 0; i < NV; ++i) {
    mask[i] = simd::TailMask(std::max<int64_t>(0, hd - d0 - 16 * i));
  }
  __m512 acc[G][NV];
  for (int g = 0; g < G; ++g) {
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const float* v = v_blocks[b] + offset + d0;
    const int64_t rows = std::min(bs, n_ctx - t);
    for (int64_t r = 0; r < rows; ++r, ++t) {
      __m512 vv[NV];
      for (int i = 0; i < NV; ++i) vv[i] = _mm512_maskz_loadu_ps(mask[i], v + r * hd + 16 * i);
      for (int g = 0; g < G; ++g) {
        const __m512 pg = _mm512_set1_ps(p[g * ldp + t]);
        for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_fmadd_ps(pg, vv[i], acc[g][i]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int i = 0; i < NV; ++i)
      _mm512_mask_storeu_ps(out + g * hd + d0 + 16 * i, mask[i], acc[g][i]);
  }
}

template <int G>
void WeightedSumVChunk(int nv, const float* p, int64_t ldp, const float* const* v_blocks,
                       int64_t offset, int64_t bs, int64_t n_ctx, int64_t hd, int64_t d0,
                       float* out) {
  switch (nv) {
    case 1:
      return WeightedSumV<G, 1>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    case 2:
      return WeightedSumV<G, 2>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    case 3:
      return WeightedSumV<G, 3>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
    default:
      return WeightedSumV<G, 4>(p, ldp, v_blocks, offset, bs, n_ctx, hd, d0, out);
  }
}
#endif

// out[group, hd] = P[group, n_ctx] · V over the blocks (kv head at `offset` in each block).
void WeightedSum(const float* p, int64_t group, int64_t n_ctx, const float* const* v_blocks,
                 int64_t offset, int64_t bs, int64_t hd, float* out) {
#if defined(__AVX512F__)
  // Chunks of up to 4 query heads x 64 dims: at most 16 accumulators.
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const int64_t gn = std::min<int64_t>(4, group - g0);
    const float* pg = p + g0 * n_ctx;
    float* og = out + g0 * hd;
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {
      const int nv = static_cast<int>(std::min<int64_t>(4, (hd - d0 + 15) / 16));
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
  std::fill(out, out + group * hd, 0.0f);
  for (int64_t b = 0, t = 0; t < n_ctx; ++b) {
    const int64_t rows = std::min(bs, n_ctx - t);
    for (int64_t r = 0; r < rows; ++r, ++t) {
      for (int64_t g = 0; g < group; ++g) {
        simd::Axpy(p[g * n_ctx + t], v_blocks[b] + offset + r * hd, out + g * hd, hd);
      }
    }
  }
#endif
}

}  // namespace

void PagedAttentionKernel(const AttentionShape& shape, const float* q, const float* const* k_blocks,
                          const float* const* v_blocks, int64_t n_ctx, float* out) {
  const int64_t hd = shape.head_dim;
  const int64_t bs = shape.block_size;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const int64_t n_blocks = (n_ctx + bs - 1) / bs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // scores [group, n_ctx]: the query heads sharing a kv head are done together so each K/V
  // row is read once per kv head.
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(group * n_ctx));

  for (int64_t h = 0; h < shape.n_kv_heads; ++h) {
    const float* qh = q + h * group * hd;
    const int64_t offset = h * bs * hd;
    // Scores of a block: Q[group, hd] · K_blockᵀ, K_block [rows, hd] being contiguous.
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t rows = std::min(bs, n_ctx - b * bs);
      DirectMatmulF32Strided(k_blocks[b] + offset, rows, hd, qh, group, scores.data() + b * bs,
                             n_ctx);
    }
    for (int64_t g = 0; g < group; ++g) {
      float* s = scores.data() + g * n_ctx;
      simd::Scale(s, n_ctx, scale);
      const float max = simd::Max(s, n_ctx);
      const double sum = simd::ExpShiftSum(s, n_ctx, max);
      // Normalize the probabilities rather than the output: out is then a convex combination
      // of V rows, as in the reference.
      simd::Scale(s, n_ctx, static_cast<float>(1.0 / sum));
    }
    WeightedSum(scores.data(), group, n_ctx, v_blocks, offset, bs, hd, out + h * group * hd);
  }
}

}  // namespace textgen::ops::internal
