#include "engine/ops/attention.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace {

using testing::Random;

// A pool of blocks laid out [n_layers][2][n_kv_heads][tile], handed out in a scrambled order
// so the op cannot rely on blocks being contiguous. K tiles are Kᵀ [head_dim, block_size], V
// tiles [block_size, head_dim] (engine/ops/attention.h).
struct Pool {
  AttentionShape shape;
  int64_t n_layers = 2;
  std::vector<float> data;
  std::vector<int64_t> order;  // slot block i -> pool block order[i]

  int64_t BlockFloats() const {
    return n_layers * 2 * shape.n_kv_heads * shape.block_size * shape.head_dim;
  }
  float* K(int64_t pool_block, int64_t layer) {
    return data.data() + pool_block * BlockFloats() +
           (layer * 2 + 0) * shape.n_kv_heads * shape.block_size * shape.head_dim;
  }
  float* V(int64_t pool_block, int64_t layer) {
    return K(pool_block, layer) + shape.n_kv_heads * shape.block_size * shape.head_dim;
  }
  // Dim d of the key of slot t, kv head h: column t % block_size of the Kᵀ tile.
  float KAt(int64_t t, int64_t h, int64_t d, int64_t layer) {
    return K(order[t / shape.block_size],
             layer)[(h * shape.head_dim + d) * shape.block_size + t % shape.block_size];
  }
  // Row of slot t, kv head h.

  const float* VRow(int64_t t, int64_t h, int64_t layer) {
    return V(order[t / shape.block_size], layer) +
           (h * shape.block_size + t % shape.block_size) * shape.head_dim;
  }
};

std::vector<double> RefAttention(Pool& pool, int64_t layer, const std::vector<float>& q,
                                 int64_t n_ctx) {
  const AttentionShape& s = pool.shape;
  const int64_t group = s.n_heads / s.n_kv_heads;
  std::vector<double> out(s.n_heads * s.head_dim, 0.0);
  for (int64_t i = 0; i < s.n_heads; ++i) {
    const int64_t h = i / group;
    std::vector<double> sc(n_ctx);
    double max = -INFINITY;
    for (int64_t t = 0; t < n_ctx; ++t) {
      double d = 0.0;
      for (int64_t k = 0; k < s.head_dim; ++k)
        d += q[i * s.head_dim + k] * pool.KAt(t, h, k, layer);
      sc[t] = d / std::sqrt(static_cast<double>(s.head_dim));
      max = std::max(max, sc[t]);
    }
    double sum = 0.0;
    for (double& v : sc) sum += (v = std::exp(v - max));
    for (int64_t t = 0; t < n_ctx; ++t) {
      for (int64_t k = 0; k < s.head_dim; ++k) {
        out[i * s.head_dim + k] += sc[t] / sum * pool.VRow(t, h, layer)[k];
      }
    }
  }
  return out;
}

TEST_CASE("PagedAttention matches a naive reference (GQA, several block sizes)") {
  struct Case {
    AttentionShape shape;
    std::vector<int64_t> n_ctxs;
  };
  const Case cases[] = {
      {{.n_heads = 8, .n_kv_heads = 4, .head_dim = 8, .block_size = 16}, {1, 15, 16, 17, 100}},
      {{.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .block_size = 32}, {1, 33, 95, 200}},
      {{.n_heads = 6, .n_kv_heads = 6, .head_dim = 20, .block_size = 1}, {1, 7}},
      {{.n_heads = 4, .n_kv_heads = 1, .head_dim = 128, .block_size = 5}, {3, 12, 61}},
      {{.n_heads = 8, .n_kv_heads = 4, .head_dim = 16, .block_size = 16}, {1, 16, 63, 130}},
      {{.n_heads = 6, .n_kv_heads = 2, .head_dim = 12, .block_size = 7}, {1, 6, 50}},
      // Blocks wider than one 16-slot vector, with a partial last vector per block.
      {{.n_heads = 4, .n_kv_heads = 2, .head_dim = 12, .block_size = 40}, {1, 39, 41, 150}},
      // One query head per kv head, and a group of 8 (split into two score passes).
      {{.n_heads = 12, .n_kv_heads = 12, .head_dim = 64, .block_size = 16}, {1, 17, 160}},
      {{.n_heads = 32, .n_kv_heads = 4, .head_dim = 64, .block_size = 16}, {5, 77, 300}},
      {{.n_heads = 10, .n_kv_heads = 2, .head_dim = 8, .block_size = 32}, {1, 31, 97}},
  };
  for (const Case& c : cases) {
    for (int64_t n_ctx : c.n_ctxs) {
      INFO("heads " << c.shape.n_heads << "/" << c.shape.n_kv_heads << " hd " << c.shape.head_dim
                    << " bs " << c.shape.block_size << " n_ctx " << n_ctx);
      Pool pool;
      pool.shape = c.shape;
      const int64_t n_blocks = (n_ctx + c.shape.block_size - 1) / c.shape.block_size + 1;
      pool.data = Random(n_blocks * pool.BlockFloats(), 17 + n_ctx, -2.0f, 2.0f);
      for (int64_t b = 0; b < n_blocks; ++b) pool.order.push_back((b * 7 + 3) % n_blocks);
      // 7 and n_blocks can share a factor; fall back to reversed order then.
      std::vector<bool> seen(n_blocks);
      bool perm = true;
      for (int64_t b : pool.order) perm = perm && !seen[b] && (seen[b] = true);
      if (!perm) {
        for (int64_t b = 0; b < n_blocks; ++b) pool.order[b] = n_blocks - 1 - b;
      }
      const int64_t layer = 1;
      std::vector<const float*> kb, vb;
      for (int64_t b = 0; b < n_blocks; ++b) {
        kb.push_back(pool.K(pool.order[b], layer));
        vb.push_back(pool.V(pool.order[b], layer));
      }
      const std::vector<float> q =
          Random(c.shape.n_heads * c.shape.head_dim, 5 + n_ctx, -1.0f, 1.0f);
      std::vector<float> out(q.size(), NAN);
      REQUIRE(PagedAttention(c.shape, q.data(), kb, vb, n_ctx, out.data()).ok());
      const std::vector<double> ref = RefAttention(pool, layer, q, n_ctx);
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(ref[i]).margin(2e-5));
    }
  }
}

TEST_CASE("PagedAttention rejects bad arguments") {
  const AttentionShape s{.n_heads = 4, .n_kv_heads = 2, .head_dim = 8, .block_size = 4};
  std::vector<float> block(2 * 4 * 8, 0.0f), q(32), out(32);
  std::vector<const float*> one = {block.data()};
  CHECK(PagedAttention(s, q.data(), one, one, 4, out.data()).ok());
  CHECK(PagedAttention(s, q.data(), one, one, 5, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(PagedAttention(s, q.data(), one, one, 0, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  AttentionShape bad = s;
  bad.n_kv_heads = 3;
  CHECK(PagedAttention(bad, q.data(), one, one, 1, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  std::vector<const float*> null_block = {nullptr};
  CHECK(PagedAttention(s, q.data(), null_block, one, 1, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace textgen::ops
