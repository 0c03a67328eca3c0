#include "engine/ops/attention.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/format/dtype.h"
#include "engine/ops/attention_kernel.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace attention_test {

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

// start, scale (0 = 1/sqrt(head_dim)), softcap and sinks as in AttentionShape / PagedAttention.
std::vector<double> RefAttention(Pool& pool, int64_t layer, const std::vector<float>& q,
                                 int64_t n_ctx, int64_t start = 0) {
  const AttentionShape& s = pool.shape;
  const int64_t group = s.n_heads / s.n_kv_heads;
  std::vector<double> out(s.n_heads * s.head_dim, 0.0);
  for (int64_t i = 0; i < s.n_heads; ++i) {
    const int64_t h = i / group;
    std::vector<double> sc(n_ctx, -INFINITY);
    double max = -INFINITY;
    const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    for (int64_t t = start; t < n_ctx; ++t) {
      double d = 0.0;
      for (int64_t k = 0; k < s.head_dim; ++k)
        d += q[i * s.head_dim + k] * pool.KAt(t, h, k, layer);
      sc[t] = d * scale;
      if (s.softcap > 0) sc[t] = s.softcap * std::tanh(sc[t] / s.softcap);
      max = std::max(max, sc[t]);
    }
    // A sink (one logit per query head) joins the maximum and the denominator only.
    const double sink = s.sinks != nullptr ? s.sinks[i] : -INFINITY;
    max = std::max(max, sink);
    double sum = std::exp(sink - max);
    for (double& v : sc) sum += (v = std::exp(v - max));
    for (int64_t t = start; t < n_ctx; ++t) {
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

TEST_CASE("PagedAttention with a window start, a scale and soft-capping matches the reference") {
  // Window starts inside a block, on a block boundary and at the last slot; Gemma-like scale and
  // soft-cap; both F32 and BF16 tiles (the BF16 result must equal the F32 op on widened tiles).
  const AttentionShape shapes[] = {
      {.n_heads = 8,
       .n_kv_heads = 4,
       .head_dim = 16,
       .block_size = 16,
       .scale = 0.25f,
       .softcap = 2.0f},
      {.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .block_size = 32, .scale = 0.05f},
      {.n_heads = 6, .n_kv_heads = 2, .head_dim = 12, .block_size = 7, .softcap = 0.5f},
      {.n_heads = 4, .n_kv_heads = 4, .head_dim = 8, .block_size = 40},
  };
  for (const AttentionShape& shape : shapes) {
    for (const auto& [n_ctx, start] : std::vector<std::pair<int64_t, int64_t>>{
             {100, 84}, {100, 0}, {64, 32}, {17, 16}, {130, 3}, {9, 8}, {200, 199}}) {
      INFO("hd " << shape.head_dim << " bs " << shape.block_size << " n_ctx " << n_ctx << " start "
                 << start);
      Pool pool;
      pool.shape = shape;
      const int64_t n_blocks = (n_ctx + shape.block_size - 1) / shape.block_size;
      pool.data = Random(n_blocks * pool.BlockFloats(), 3 + n_ctx + start, -2.0f, 2.0f);
      for (int64_t b = 0; b < n_blocks; ++b) pool.order.push_back(n_blocks - 1 - b);
      std::vector<const float*> kb, vb;
      for (int64_t b = 0; b < n_blocks; ++b) {
        // Blocks wholly before the window are never read: pass null for them.
        const bool before = (b + 1) * shape.block_size <= start;
        kb.push_back(before ? nullptr : pool.K(pool.order[b], 0));
        vb.push_back(before ? nullptr : pool.V(pool.order[b], 0));
      }
      const std::vector<float> q = Random(shape.n_heads * shape.head_dim, 9 + n_ctx, -3.0f, 3.0f);
      std::vector<float> out(q.size(), NAN);
      REQUIRE(PagedAttention(shape, q.data(), kb, vb, n_ctx, out.data(), start).ok());
      const std::vector<double> ref = RefAttention(pool, 0, q, n_ctx, start);
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(ref[i]).margin(2e-5));

      // BF16 tiles: the same op on the rounded values.
      std::vector<uint16_t> data16(pool.data.size());
      for (size_t i = 0; i < data16.size(); ++i) data16[i] = F32ToBF16(pool.data[i]);
      for (size_t i = 0; i < data16.size(); ++i) pool.data[i] = BF16ToF32(data16[i]);
      std::vector<const uint16_t*> kb16, vb16;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t off16 = kb[b] == nullptr ? -1 : kb[b] - pool.data.data();
        kb16.push_back(off16 < 0 ? nullptr : data16.data() + off16);
        vb16.push_back(off16 < 0 ? nullptr : data16.data() + (vb[b] - pool.data.data()));
      }
      std::vector<float> out16(q.size(), NAN), out32(q.size(), NAN);
      REQUIRE(PagedAttention(shape, q.data(), kb16, vb16, n_ctx, out16.data(), start).ok());
      REQUIRE(PagedAttention(shape, q.data(), kb, vb, n_ctx, out32.data(), start).ok());
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out16[i] == Approx(out32[i]).margin(1e-6));
    }
  }
  const AttentionShape shape{.n_heads = 2, .n_kv_heads = 1, .head_dim = 8, .block_size = 4};
  std::vector<float> q(16, 0.0f), out(16), tile(64, 0.0f);
  std::vector<const float*> blocks = {tile.data(), tile.data()};
  CHECK(PagedAttention(shape, q.data(), blocks, blocks, 8, out.data(), 8).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(PagedAttention(shape, q.data(), blocks, blocks, 8, out.data(), -1).code() ==
        absl::StatusCode::kInvalidArgument);
  AttentionShape bad = shape;
  bad.softcap = -1.0f;
  CHECK(PagedAttention(bad, q.data(), blocks, blocks, 8, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
}

// gpt-oss's attention sinks: each query head's own extra logit in the denominator, against a
// direct softmax (GQA groups, windows, F32 and BF16 tiles); sinks of -inf change no bit, and a
// sink far above the scores leaves almost nothing of the head's output.
TEST_CASE("PagedAttention with sinks matches a direct softmax with the extra logit") {
  const AttentionShape shapes[] = {
      {.n_heads = 8, .n_kv_heads = 4, .head_dim = 16, .block_size = 16},
      {.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .block_size = 32, .scale = 0.05f},
      {.n_heads = 6, .n_kv_heads = 2, .head_dim = 12, .block_size = 7, .softcap = 0.5f},
      {.n_heads = 4, .n_kv_heads = 4, .head_dim = 8, .block_size = 40},
  };
  for (AttentionShape shape : shapes) {
    // Sinks from well below to well above the scores, different per query head.
    const std::vector<float> sinks = Random(shape.n_heads, 31 + shape.head_dim, -4.0f, 4.0f);
    shape.sinks = sinks.data();
    for (const auto& [n_ctx, start] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {16, 0}, {100, 84}, {130, 3}}) {
      INFO("hd " << shape.head_dim << " bs " << shape.block_size << " n_ctx " << n_ctx << " start "
                 << start);
      Pool pool;
      pool.shape = shape;
      const int64_t n_blocks = (n_ctx + shape.block_size - 1) / shape.block_size;
      pool.data = Random(n_blocks * pool.BlockFloats(), 7 + n_ctx, -2.0f, 2.0f);
      for (int64_t b = 0; b < n_blocks; ++b) pool.order.push_back(n_blocks - 1 - b);
      std::vector<const float*> kb, vb;
      for (int64_t b = 0; b < n_blocks; ++b) {
        kb.push_back(pool.K(pool.order[b], 0));
        vb.push_back(pool.V(pool.order[b], 0));
      }
      const std::vector<float> q = Random(shape.n_heads * shape.head_dim, 8 + n_ctx, -3.0f, 3.0f);
      std::vector<float> out(q.size(), NAN);
      REQUIRE(PagedAttention(shape, q.data(), kb, vb, n_ctx, out.data(), start).ok());
      const std::vector<double> ref = RefAttention(pool, 0, q, n_ctx, start);
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(ref[i]).margin(2e-5));
      // The same with the sinks ignored is really different (they matter here).
      AttentionShape no_sinks = shape;
      no_sinks.sinks = nullptr;
      std::vector<float> plain(q.size(), NAN);
      REQUIRE(PagedAttention(no_sinks, q.data(), kb, vb, n_ctx, plain.data(), start).ok());
      double moved = 0;
      for (size_t i = 0; i < out.size(); ++i)
        moved = std::max(moved, double{std::abs(out[i] - plain[i])});
      CHECK(moved > 1e-3);
      // Sinks of -inf: exp(-inf) adds 0, the bytes of the call without sinks.
      const std::vector<float> none(shape.n_heads, -INFINITY);
      AttentionShape inf_sinks = shape;
      inf_sinks.sinks = none.data();
      std::vector<float> same(q.size(), NAN);
      REQUIRE(PagedAttention(inf_sinks, q.data(), kb, vb, n_ctx, same.data(), start).ok());
      CHECK(std::memcmp(same.data(), plain.data(), plain.size() * sizeof(float)) == 0);
      // A sink 60 above every score takes all but e^-50 of the mass.
      const std::vector<float> huge(shape.n_heads, 60.0f);
      AttentionShape huge_sinks = shape;
      huge_sinks.sinks = huge.data();
      REQUIRE(PagedAttention(huge_sinks, q.data(), kb, vb, n_ctx, same.data(), start).ok());
      for (float v : same) REQUIRE(std::abs(v) < 1e-12f);
      // BF16 tiles: the same op on the widened values.
      std::vector<uint16_t> data16(pool.data.size());
      for (size_t i = 0; i < data16.size(); ++i) data16[i] = F32ToBF16(pool.data[i]);
      for (size_t i = 0; i < data16.size(); ++i) pool.data[i] = BF16ToF32(data16[i]);
      std::vector<const uint16_t*> kb16, vb16;
      for (int64_t b = 0; b < n_blocks; ++b) {
        kb16.push_back(data16.data() + (kb[b] - pool.data.data()));
        vb16.push_back(data16.data() + (vb[b] - pool.data.data()));
      }
      std::vector<float> out16(q.size(), NAN);
      REQUIRE(PagedAttention(shape, q.data(), kb16, vb16, n_ctx, out16.data(), start).ok());
      const std::vector<double> ref16 = RefAttention(pool, 0, q, n_ctx, start);
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out16[i] == Approx(ref16[i]).margin(2e-5));
    }
  }
}

// A token's kv heads split into ranges (the model's single-stream decode on several threads):
// every head's output bytes as in the whole call, F32 and BF16 tiles, rows of other heads not
// touched, and bad ranges refused.
TEST_CASE("PagedAttention over kv head ranges gives the whole call's bytes") {
  for (AttentionShape shape :
       {AttentionShape{.n_heads = 12, .n_kv_heads = 12, .head_dim = 16, .block_size = 16},
        AttentionShape{.n_heads = 8, .n_kv_heads = 2, .head_dim = 32, .block_size = 8},
        AttentionShape{
            .n_heads = 6, .n_kv_heads = 3, .head_dim = 12, .block_size = 7, .softcap = 0.5f}}) {
    INFO("heads " << shape.n_heads << " kv " << shape.n_kv_heads);
    const int64_t n_ctx = 75, start = shape.softcap > 0 ? 10 : 0;
    // Sinks on one shape: a head range must index them by query head.
    const std::vector<float> sinks = Random(shape.n_heads, 2, -1.0f, 3.0f);
    if (shape.n_kv_heads == 2) shape.sinks = sinks.data();
    Pool pool;
    pool.shape = shape;
    const int64_t n_blocks = (n_ctx + shape.block_size - 1) / shape.block_size;
    pool.data = Random(n_blocks * pool.BlockFloats(), 5, -2.0f, 2.0f);
    std::vector<uint16_t> data16(pool.data.size());
    for (size_t i = 0; i < data16.size(); ++i) data16[i] = F32ToBF16(pool.data[i]);
    std::vector<const float*> kb, vb;
    std::vector<const uint16_t*> kb16, vb16;
    for (int64_t b = 0; b < n_blocks; ++b) {
      kb.push_back(pool.K(b, 0));
      vb.push_back(pool.V(b, 0));
      kb16.push_back(data16.data() + (kb.back() - pool.data.data()));
      vb16.push_back(data16.data() + (vb.back() - pool.data.data()));
    }
    const std::vector<float> q = Random(shape.n_heads * shape.head_dim, 6, -3.0f, 3.0f);
    std::vector<float> whole(q.size()), whole16(q.size());
    REQUIRE(PagedAttention(shape, q.data(), kb, vb, n_ctx, whole.data(), start).ok());
    REQUIRE(PagedAttention(shape, q.data(), kb16, vb16, n_ctx, whole16.data(), start).ok());
    const int64_t per_kv = shape.n_heads / shape.n_kv_heads * shape.head_dim;
    for (int64_t parts = 1; parts <= shape.n_kv_heads; ++parts) {
      std::vector<float> split(q.size(), NAN), split16(q.size(), NAN);
      for (int64_t p = 0; p < parts; ++p) {
        const KvHeadRange heads{shape.n_kv_heads * p / parts, shape.n_kv_heads * (p + 1) / parts};
        // Each part into a buffer of NaNs: outside its heads' rows it must write nothing.
        std::vector<float> part(q.size(), NAN), part16(q.size(), NAN);
        REQUIRE(PagedAttention(shape, q.data(), kb, vb, n_ctx, part.data(), start, heads).ok());
        REQUIRE(
            PagedAttention(shape, q.data(), kb16, vb16, n_ctx, part16.data(), start, heads).ok());
        for (int64_t i = 0; i < static_cast<int64_t>(part.size()); ++i) {
          const bool inside = i >= heads.begin * per_kv && i < heads.end * per_kv;
          if (inside) {
            split[i] = part[i];
            split16[i] = part16[i];
          } else {
            REQUIRE(std::isnan(part[i]));
            REQUIRE(std::isnan(part16[i]));
          }
        }
      }
      INFO(parts << " parts");
      CHECK(std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(split16.data(), whole16.data(), whole16.size() * sizeof(float)) == 0);
    }
    std::vector<float> out(q.size());
    for (const KvHeadRange bad : {KvHeadRange{-1, 1}, KvHeadRange{0, shape.n_kv_heads + 1},
                                  KvHeadRange{1, 1}, KvHeadRange{2, 1}, KvHeadRange{1, 0}}) {
      CHECK(PagedAttention(shape, q.data(), kb, vb, n_ctx, out.data(), 0, bad).code() ==
            absl::StatusCode::kInvalidArgument);
    }
  }
}

// The shapes of the F32 test, fewer lengths: BF16 tiles go through the same kernels.
struct Bf16Case {
  AttentionShape shape;
  int64_t n_ctx;
};
const Bf16Case kBf16Cases[] = {
    {{.n_heads = 8, .n_kv_heads = 4, .head_dim = 8, .block_size = 16}, 100},
    {{.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .block_size = 32}, 95},
    {{.n_heads = 6, .n_kv_heads = 6, .head_dim = 20, .block_size = 1}, 7},
    {{.n_heads = 4, .n_kv_heads = 1, .head_dim = 128, .block_size = 5}, 61},
    {{.n_heads = 4, .n_kv_heads = 2, .head_dim = 12, .block_size = 40}, 150},
    {{.n_heads = 12, .n_kv_heads = 12, .head_dim = 64, .block_size = 16}, 200},
    {{.n_heads = 32, .n_kv_heads = 4, .head_dim = 64, .block_size = 16}, 77},
    {{.n_heads = 10, .n_kv_heads = 2, .head_dim = 8, .block_size = 32}, 1},
};

// One layer's K and V tiles per block, [n_blocks][2][n_kv_heads][tile], in F32 and as BF16
// bits, with block pointers for both.
struct Bf16Blocks {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<const float*> k32, v32;
  std::vector<const uint16_t*> k16, v16;

  Bf16Blocks(const AttentionShape& s, int64_t n_blocks, std::vector<float> values) {
    f32 = std::move(values);
    for (float x : f32) bf16.push_back(F32ToBF16(x));
    const int64_t half = s.n_kv_heads * s.block_size * s.head_dim;
    // Reversed order: the op must follow the pointers, not assume contiguous blocks.
    for (int64_t b = n_blocks - 1; b >= 0; --b) {
      k32.push_back(f32.data() + b * 2 * half);
      v32.push_back(f32.data() + b * 2 * half + half);
      k16.push_back(bf16.data() + b * 2 * half);
      v16.push_back(bf16.data() + b * 2 * half + half);
    }
  }
};

TEST_CASE("PagedAttention over BF16 tiles equals the F32 op on the widened values") {
  for (const Bf16Case& c : kBf16Cases) {
    INFO("heads " << c.shape.n_heads << "/" << c.shape.n_kv_heads << " hd " << c.shape.head_dim
                  << " bs " << c.shape.block_size << " n_ctx " << c.n_ctx);
    const int64_t n_blocks = (c.n_ctx + c.shape.block_size - 1) / c.shape.block_size;
    std::vector<float> values =
        Random(n_blocks * 2 * c.shape.n_kv_heads * c.shape.block_size * c.shape.head_dim, 3, -2, 2);
    // The F32 side holds exactly the BF16 values.
    for (float& x : values) x = BF16ToF32(F32ToBF16(x));
    const Bf16Blocks blocks(c.shape, n_blocks, values);
    const std::vector<float> q = Random(c.shape.n_heads * c.shape.head_dim, 4);
    std::vector<float> out32(q.size(), NAN), out16(q.size(), NAN);
    REQUIRE(PagedAttention(c.shape, q.data(), blocks.k32, blocks.v32, c.n_ctx, out32.data()).ok());
    REQUIRE(PagedAttention(c.shape, q.data(), blocks.k16, blocks.v16, c.n_ctx, out16.data()).ok());
    for (size_t i = 0; i < q.size(); ++i) {
      REQUIRE(out16[i] == Approx(out32[i]).epsilon(1e-6).margin(1e-7));
    }
  }
}

TEST_CASE("PagedAttention over BF16 tiles stays within BF16 rounding of F32 K/V") {
  // Rounding K and V to BF16 moves each by at most 2^-8 relative: a score by about
  // 2^-8 * |q| |k| / sqrt(head_dim) and the output by that times the spread of V, plus V's own
  // rounding. Over these values (|k|, |v| <= 2, |q| <= 1) that stays below ~1e-2; a wrong
  // tile or a misread element would be off by O(1).
  double max_diff = 0;
  for (const Bf16Case& c : kBf16Cases) {
    INFO("heads " << c.shape.n_heads << "/" << c.shape.n_kv_heads << " hd " << c.shape.head_dim
                  << " bs " << c.shape.block_size << " n_ctx " << c.n_ctx);
    const int64_t n_blocks = (c.n_ctx + c.shape.block_size - 1) / c.shape.block_size;
    const Bf16Blocks blocks(
        c.shape, n_blocks,
        Random(n_blocks * 2 * c.shape.n_kv_heads * c.shape.block_size * c.shape.head_dim, 5, -2,
               2));
    const std::vector<float> q = Random(c.shape.n_heads * c.shape.head_dim, 6);
    std::vector<float> out32(q.size(), NAN), out16(q.size(), NAN);
    REQUIRE(PagedAttention(c.shape, q.data(), blocks.k32, blocks.v32, c.n_ctx, out32.data()).ok());
    REQUIRE(PagedAttention(c.shape, q.data(), blocks.k16, blocks.v16, c.n_ctx, out16.data()).ok());
    for (size_t i = 0; i < q.size(); ++i) {
      REQUIRE(out16[i] == Approx(out32[i]).margin(1e-2));
      max_diff = std::max(max_diff, static_cast<double>(std::abs(out16[i] - out32[i])));
    }
  }
  // The rounding is really there (the BF16 side did not read the F32 values).
  CHECK(max_diff > 1e-4);
}

TEST_CASE("PagedAttention over BF16 tiles rejects bad arguments like the F32 op") {
  const AttentionShape s{.n_heads = 4, .n_kv_heads = 2, .head_dim = 8, .block_size = 4};
  std::vector<uint16_t> block(2 * 4 * 8, 0);
  std::vector<float> q(32), out(32);
  std::vector<const uint16_t*> one = {block.data()};
  CHECK(PagedAttention(s, q.data(), one, one, 4, out.data()).ok());
  CHECK(PagedAttention(s, q.data(), one, one, 5, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  std::vector<const uint16_t*> null_block = {nullptr};
  CHECK(PagedAttention(s, q.data(), null_block, one, 1, out.data()).code() ==
        absl::StatusCode::kInvalidArgument);
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

// Issue #32: every level's attention kernel gives the portable form's bytes (scripts/
// test-isa-levels.sh runs this at each level the CPU has): head dims from 8 to 256 (vector
// tails included), GQA groups 1-8 (query-head chunks of 1-4), block sizes that do and do not
// divide the context, contexts up to 2048, windows, a scale, soft-capping and sinks, F32 and BF16
// tiles, some with NaN, infinite, huge and subnormal keys and values.
TEST_CASE("PagedAttentionKernel gives the portable kernel's bytes at this level") {
  struct Case {
    AttentionShape shape;
    int64_t n_ctx, start;
  };
  std::vector<Case> cases;
  uint32_t seed = 1;
  // Attention sinks on every third case (up to 16 query heads), some above the scores.
  const std::vector<float> sink_values = Random(16, 99, -3.0f, 12.0f);
  for (int64_t hd : {8, 16, 24, 40, 64, 72, 128, 256}) {
    for (int64_t group : {1, 2, 3, 4, 5, 8}) {
      const int64_t n_kv = group >= 5 ? 1 : 2;
      for (int64_t n_ctx : {1, 17, 100, 512, 2048}) {
        if (hd * group * n_ctx > 2048 * 64 * 4) continue;  // the portable form is scalar
        const int64_t bs = (seed++ % 3 == 0) ? 7 : 16;
        Case c{{.n_heads = group * n_kv, .n_kv_heads = n_kv, .head_dim = hd, .block_size = bs},
               n_ctx,
               0};
        if (seed % 4 == 0 && n_ctx > 20) c.start = n_ctx / 3;
        if (seed % 5 == 0) c.shape.softcap = 20.0f;
        if (seed % 7 == 0) c.shape.scale = 0.3f;
        if (seed % 3 == 1) c.shape.sinks = sink_values.data();
        cases.push_back(c);
      }
    }
  }
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    INFO("heads " << s.n_heads << "/" << s.n_kv_heads << " hd " << s.head_dim << " bs "
                  << s.block_size << " n_ctx " << c.n_ctx << " start " << c.start << " softcap "
                  << s.softcap << " scale " << s.scale << " sinks " << (s.sinks != nullptr)
                  << " seed " << seed);
    const int64_t n_blocks = (c.n_ctx + s.block_size - 1) / s.block_size;
    // Every fifth case has NaN, infinities, huge and subnormal keys and values mixed in.
    const bool specials = seed % 5 == 0;
    std::vector<float> values = testing::RandomWithSpecials(
        n_blocks * 2 * s.n_kv_heads * s.block_size * s.head_dim, seed++, -2.0f, 2.0f, specials);
    const Bf16Blocks blocks(s, n_blocks, std::move(values));
    // Large queries make peaked softmaxes with exponentials near the ends of the range.
    const std::vector<float> q = Random(s.n_heads * s.head_dim, seed++, -4.0f, 4.0f);
    std::vector<float> got(q.size(), NAN), want(q.size(), NAN);
    internal::PagedAttentionKernel(s, q.data(), blocks.k32.data(), blocks.v32.data(), c.n_ctx,
                                   got.data(), c.start, 0, s.n_kv_heads);
    internal::portable::PagedAttentionKernel(s, q.data(), blocks.k32.data(), blocks.v32.data(),
                                             c.n_ctx, want.data(), c.start, 0, s.n_kv_heads);
    INFO("f32 " << testing::FirstByteDifference(got, want));
    CHECK(testing::SameBytesUpToNaN(got, want));
    std::fill(got.begin(), got.end(), NAN);
    std::fill(want.begin(), want.end(), NAN);
    internal::PagedAttentionKernel(s, q.data(), blocks.k16.data(), blocks.v16.data(), c.n_ctx,
                                   got.data(), c.start, 0, s.n_kv_heads);
    internal::portable::PagedAttentionKernel(s, q.data(), blocks.k16.data(), blocks.v16.data(),
                                             c.n_ctx, want.data(), c.start, 0, s.n_kv_heads);
    INFO("bf16 " << testing::FirstByteDifference(got, want));
    CHECK(testing::SameBytesUpToNaN(got, want));
  }
}

}  // namespace attention_test
}  // namespace textgen::ops
