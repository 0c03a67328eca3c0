#include "engine/ops/rope.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "engine/format/dtype.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace rope_test {

using testing::Random;

// Naive rope in double over x [n, n_heads, head_dim].
std::vector<double> RefRope(const RopeConfig& c, const std::vector<int32_t>& pos,
                            const std::vector<float>& x) {
  std::vector<double> out(x.begin(), x.end());
  const int64_t n = static_cast<int64_t>(pos.size());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t h = 0; h < c.n_heads; ++h) {
      double* v = out.data() + (r * c.n_heads + h) * c.head_dim;
      for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
        double theta =
            pos[r] * static_cast<double>(c.freq_scale) *
            std::pow(static_cast<double>(c.freq_base), -2.0 * i / static_cast<double>(c.rope_dim));
        if (c.freq_factors != nullptr) theta /= c.freq_factors[i];
        // NEOX pairs dims (i, i + rope_dim/2), the normal layout (2i, 2i+1).
        const int64_t a = c.neox ? i : 2 * i, b = c.neox ? i + c.rope_dim / 2 : 2 * i + 1;
        const double x0 = v[a], x1 = v[b], m = c.attn_factor;
        v[a] = m * (x0 * std::cos(theta) - x1 * std::sin(theta));
        v[b] = m * (x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
  return out;
}

TEST_CASE("Rope matches a double reference, partial rope_dim leaves the rest") {
  const RopeConfig configs[] = {
      {.n_heads = 8, .head_dim = 8, .rope_dim = 8, .freq_base = 10000.0f},
      {.n_heads = 4, .head_dim = 64, .rope_dim = 64, .freq_base = 500000.0f},
      {.n_heads = 3, .head_dim = 32, .rope_dim = 16, .freq_base = 10000.0f},
      {.n_heads = 2, .head_dim = 16, .rope_dim = 16, .freq_base = 10000.0f, .freq_scale = 0.25f},
  };
  const std::vector<int32_t> pos = {0, 1, 2, 17, 255, 4095, 100000};
  for (const RopeConfig& c : configs) {
    const int64_t n = static_cast<int64_t>(pos.size());
    std::vector<float> x = Random(n * c.n_heads * c.head_dim, c.head_dim);
    const std::vector<float> x0 = x;
    const std::vector<double> ref = RefRope(c, pos, x);
    Rope(c, pos.data(), n, x.data());
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == Approx(ref[i]).margin(1e-5));
    // Dims past rope_dim are bit-identical.
    for (int64_t r = 0; r < n * c.n_heads; ++r) {
      for (int64_t d = c.rope_dim; d < c.head_dim; ++d) {
        REQUIRE(x[r * c.head_dim + d] == x0[r * c.head_dim + d]);
      }
    }
  }
}

TEST_CASE("NEOX Rope with frequency factors and an attention factor matches the reference") {
  const float factors[] = {1.0f, 1.0f, 2.3391166f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  const RopeConfig configs[] = {
      {.n_heads = 4, .head_dim = 16, .rope_dim = 16, .neox = true},
      {.n_heads = 2, .head_dim = 32, .rope_dim = 16, .neox = true, .freq_factors = factors},
      {.n_heads = 3, .head_dim = 16, .rope_dim = 16, .freq_factors = factors},
      {.n_heads = 2,
       .head_dim = 16,
       .rope_dim = 16,
       .freq_base = 1e6f,
       .freq_scale = 0.125f,
       .neox = true,
       .freq_factors = factors,
       .attn_factor = 1.19f},
  };
  const std::vector<int32_t> pos = {0, 1, 5, 300, 4095};
  for (const RopeConfig& c : configs) {
    const int64_t n = static_cast<int64_t>(pos.size());
    std::vector<float> x = Random(n * c.n_heads * c.head_dim, 3 + c.head_dim);
    const std::vector<double> ref = RefRope(c, pos, x);
    Rope(c, pos.data(), n, x.data());
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == Approx(ref[i]).margin(2e-5));
    // The shift of transposed keys composes with the same pairing and factors (no attention
    // factor: cached keys carry it once): Rope at p, shifted by -d, equals Rope at p - d.
    if (c.attn_factor != 1.0f) continue;
    const int64_t ld = 8, slots = 5;
    std::vector<float> rows = Random(slots * c.n_heads * c.head_dim, 11);
    std::vector<int32_t> p(slots, 40), p2(slots, 40 - 17);
    std::vector<float> want = rows;
    Rope(c, p2.data(), slots, want.data());
    Rope(c, p.data(), slots, rows.data());
    std::vector<float> kt(c.n_heads * c.head_dim * ld, 0.0f);
    for (int64_t r = 0; r < slots; ++r) {
      for (int64_t e = 0; e < c.n_heads * c.head_dim; ++e)
        kt[e * ld + r] = rows[r * c.n_heads * c.head_dim + e];
    }
    RopeShiftTransposed(c, -17, slots, ld, kt.data());
    for (int64_t r = 0; r < slots; ++r) {
      for (int64_t e = 0; e < c.n_heads * c.head_dim; ++e) {
        REQUIRE(kt[e * ld + r] == Approx(want[r * c.n_heads * c.head_dim + e]).margin(1e-5));
      }
    }
  }
}

// Rope keeps cos/sin tables per thread (engine/ops/rope.cc's AngleCache): whatever ran before on
// the thread, a call must give the bytes a fresh thread computes.
TEST_CASE("Rope's angle cache: interleaved settings and reused positions give fresh results") {
  float factors[] = {1.0f, 1.0f, 2.5f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  const RopeConfig a{.n_heads = 2, .head_dim = 16, .rope_dim = 16};
  const RopeConfig b{.n_heads = 2, .head_dim = 16, .rope_dim = 16, .freq_base = 1e6f};
  const RopeConfig c{.n_heads = 2, .head_dim = 16, .rope_dim = 16, .freq_factors = factors};
  const RopeConfig d{.n_heads = 1, .head_dim = 32, .rope_dim = 8, .attn_factor = 1.5f};
  // 7 and 263 share a cache slot (256 slots), as do 0 and 256.
  const std::vector<int32_t> pos = {7, 263, 0, 256, 7, 100000};
  auto fresh = [&](const RopeConfig& cfg, std::vector<float> x) {
    std::thread t([&] { Rope(cfg, pos.data(), static_cast<int64_t>(pos.size()), x.data()); });
    t.join();
    return x;
  };
  const std::vector<float> x = Random(static_cast<int64_t>(pos.size()) * 32, 5);
  // Ends and starts with c, so that round 1's first call finds c's table of round 0.
  const RopeConfig* order[] = {&c, &a, &b, &a, &c, &b, &d, &c, &a, &d, &d, &c};
  for (int round = 0; round < 2; ++round) {
    if (round == 1) factors[2] = 3.0f;  // same pointer, new values: must not hit the old table
    for (const RopeConfig* cfg : order) {
      std::vector<float> got = x;
      Rope(*cfg, pos.data(), static_cast<int64_t>(pos.size()), got.data());
      REQUIRE(got == fresh(*cfg, x));
    }
  }
}

// YaRN written out from its definition (ggml's rope_yarn, ext_factor 1), in double: the
// correction dims, the ramp, the blended angle, cos/sin times attn_factor.
std::vector<double> RefYarnRope(const RopeConfig& c, const std::vector<int32_t>& pos,
                                const std::vector<float>& x) {
  const double d = static_cast<double>(c.rope_dim);
  auto corr_dim = [&](double beta) {
    return d * std::log(c.yarn_orig_ctx / (beta * 2 * M_PI)) / (2 * std::log(c.freq_base));
  };
  const double lo = std::max(0.0, std::floor(corr_dim(c.yarn_beta_fast)));
  const double hi = std::min(d - 1, std::ceil(corr_dim(c.yarn_beta_slow)));
  std::vector<double> out(x.begin(), x.end());
  for (size_t r = 0; r < pos.size(); ++r) {
    for (int64_t h = 0; h < c.n_heads; ++h) {
      double* v = out.data() + (r * c.n_heads + h) * c.head_dim;
      for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
        const double extrap = pos[r] * std::pow(static_cast<double>(c.freq_base), -2.0 * i / d);
        const double interp = extrap * c.freq_scale;
        const double mix = 1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
        const double theta = interp * (1 - mix) + extrap * mix;
        const int64_t a = c.neox ? i : 2 * i, b = c.neox ? i + c.rope_dim / 2 : 2 * i + 1;
        const double x0 = v[a], x1 = v[b], m = c.attn_factor;
        v[a] = m * (x0 * std::cos(theta) - x1 * std::sin(theta));
        v[b] = m * (x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
  return out;
}

TEST_CASE("YaRN Rope matches its definition, and a shift is still one rotation") {
  const float mscale = 1.0f + 0.1f * std::log(32.0f);
  // The gpt-oss test model's RoPE (correction dims 0 and 4 of 8 pairs) and gpt-oss-20b's
  // (head_dim 64, base 150000, original context 4096: dims 8 and 18 of 32), both factor 32.
  const RopeConfig configs[] = {
      {.n_heads = 4,
       .head_dim = 16,
       .rope_dim = 16,
       .freq_scale = 1.0f / 32,
       .neox = true,
       .attn_factor = mscale,
       .yarn_orig_ctx = 512},
      {.n_heads = 2,
       .head_dim = 64,
       .rope_dim = 64,
       .freq_base = 150000.0f,
       .freq_scale = 1.0f / 32,
       .neox = true,
       .attn_factor = mscale,
       .yarn_orig_ctx = 4096},
      {.n_heads = 2,
       .head_dim = 32,
       .rope_dim = 32,
       .freq_scale = 0.25f,
       .yarn_orig_ctx = 2048,
       .yarn_beta_fast = 16.0f,
       .yarn_beta_slow = 2.0f},
  };
  // The ramp of the first: extrapolated below pair 0's dim, interpolated from pair 4 on.
  const float want_ramp[] = {1.0f, 0.75f, 0.5f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t i = 0; i < 8; ++i) CHECK(YarnRamp(configs[0], i) == want_ramp[i]);
  const std::vector<int32_t> pos = {0, 1, 5, 16, 300, 4095, 16383};
  for (const RopeConfig& c : configs) {
    INFO("rope_dim " << c.rope_dim << " base " << c.freq_base);
    const int64_t n = static_cast<int64_t>(pos.size()), row = c.n_heads * c.head_dim;
    std::vector<float> x = Random(n * row, 9 + c.head_dim);
    const std::vector<double> ref = RefYarnRope(c, pos, x);
    // The same settings without YaRN first: its angle table must not be reused.
    RopeConfig plain = c;
    plain.yarn_orig_ctx = 0;
    std::vector<float> y = x;
    Rope(plain, pos.data(), n, y.data());
    Rope(c, pos.data(), n, x.data());
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == Approx(ref[i]).margin(2e-5));
    CHECK(x != y);
    // Rope at p, then shifted by -d (RopeShift and the cache's transposed form, which do not
    // apply attn_factor again), equals Rope at p - d.
    const int64_t slots = 5, ld = 8;
    const std::vector<float> k = Random(slots * row, 13);
    std::vector<int32_t> p(slots), p2(slots);
    for (int64_t r = 0; r < slots; ++r) {
      p[r] = static_cast<int32_t>(700 + 3 * r);
      p2[r] = p[r] - 600;
    }
    std::vector<float> want = k, shifted = k;
    Rope(c, p2.data(), slots, want.data());
    Rope(c, p.data(), slots, shifted.data());
    std::vector<float> kt(row * ld, 0.0f);
    for (int64_t r = 0; r < slots; ++r) {
      for (int64_t e = 0; e < row; ++e) kt[e * ld + r] = shifted[r * row + e];
    }
    RopeShift(c, -600, slots, shifted.data());
    RopeShiftTransposed(c, -600, slots, ld, kt.data());
    for (int64_t r = 0; r < slots; ++r) {
      for (int64_t e = 0; e < row; ++e) {
        REQUIRE(shifted[r * row + e] == Approx(want[r * row + e]).margin(1e-5));
        REQUIRE(kt[e * ld + r] == Approx(shifted[r * row + e]).margin(1e-6));
      }
    }
  }
}

TEST_CASE("RopeShift composes: rotate by a then b equals rotate by a + b") {
  const RopeConfig c{.n_heads = 1, .head_dim = 64, .rope_dim = 64, .freq_base = 10000.0f};
  const int64_t block = 16;
  const std::vector<float> x = Random(block * c.head_dim, 42);
  for (auto [a, b] : std::vector<std::pair<int32_t, int32_t>>{{5, 7}, {1000, -300}, {37, -37}}) {
    std::vector<float> twice = x;
    RopeShift(c, a, block, twice.data());
    RopeShift(c, b, block, twice.data());
    std::vector<float> once = x;
    RopeShift(c, a + b, block, once.data());
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(twice[i] == Approx(once[i]).margin(1e-5));
  }
  // Rope at p then shift by d == Rope at p + d.
  std::vector<int32_t> pos(block);
  std::vector<int32_t> pos_shifted(block);
  for (int64_t i = 0; i < block; ++i) {
    pos[i] = static_cast<int32_t>(100 + i);
    pos_shifted[i] = pos[i] - 64;
  }
  std::vector<float> shifted = x;
  Rope(c, pos.data(), block, shifted.data());
  RopeShift(c, -64, block, shifted.data());
  std::vector<float> direct = x;
  Rope(c, pos_shifted.data(), block, direct.data());
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(shifted[i] == Approx(direct[i]).margin(1e-5));
}

TEST_CASE("RopeShiftTransposed equals RopeShift on the transposed keys") {
  const RopeConfig configs[] = {
      {.n_heads = 1, .head_dim = 8, .rope_dim = 8, .freq_base = 10000.0f},
      {.n_heads = 4, .head_dim = 16, .rope_dim = 16, .freq_base = 10000.0f},
      {.n_heads = 2, .head_dim = 64, .rope_dim = 64, .freq_base = 500000.0f},
      {.n_heads = 3, .head_dim = 12, .rope_dim = 8, .freq_base = 10000.0f},
  };
  for (const RopeConfig& c : configs) {
    for (auto [n_slots, ld] :
         std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {5, 7}, {33, 33}}) {
      for (int32_t delta : {-16, -4096, 37}) {
        INFO("hd " << c.head_dim << " rope_dim " << c.rope_dim << " slots " << n_slots << "/" << ld
                   << " delta " << delta);
        // kt [n_heads, head_dim, ld]; x [n_slots, n_heads, head_dim] the same keys row-major.
        std::vector<float> kt = Random(c.n_heads * c.head_dim * ld, 7 + ld);
        const std::vector<float> kt0 = kt;
        std::vector<float> x(n_slots * c.n_heads * c.head_dim);
        for (int64_t r = 0; r < n_slots; ++r) {
          for (int64_t hd = 0; hd < c.n_heads * c.head_dim; ++hd) {
            x[r * c.n_heads * c.head_dim + hd] = kt[hd * ld + r];
          }
        }
        RopeShift(c, delta, n_slots, x.data());
        RopeShiftTransposed(c, delta, n_slots, ld, kt.data());
        for (int64_t hd = 0; hd < c.n_heads * c.head_dim; ++hd) {
          for (int64_t r = 0; r < ld; ++r) {
            if (r < n_slots) {
              REQUIRE(kt[hd * ld + r] == Approx(x[r * c.n_heads * c.head_dim + hd]).margin(1e-6));
            } else {
              REQUIRE(kt[hd * ld + r] == kt0[hd * ld + r]);  // columns past n_slots untouched
            }
          }
        }
      }
    }
  }
}

TEST_CASE("RopeShiftTransposed on BF16 keys rounds the F32 rotation of the widened keys") {
  const RopeConfig configs[] = {
      {.n_heads = 2, .head_dim = 64, .rope_dim = 64, .freq_base = 10000.0f},
      {.n_heads = 3, .head_dim = 12, .rope_dim = 8, .freq_base = 10000.0f},  // partial rope
  };
  for (const RopeConfig& c : configs) {
    for (auto [n_slots, ld] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {5, 7}}) {
      for (int32_t delta : {-16, -4096}) {
        INFO("hd " << c.head_dim << " slots " << n_slots << "/" << ld << " delta " << delta);
        std::vector<uint16_t> kt16;
        for (float x : Random(c.n_heads * c.head_dim * ld, 11 + ld, -3, 3)) {
          kt16.push_back(F32ToBF16(x));
        }
        const std::vector<uint16_t> kt16_0 = kt16;
        std::vector<float> kt32;
        for (uint16_t h : kt16) kt32.push_back(BF16ToF32(h));
        RopeShiftTransposed(c, delta, n_slots, ld, kt32.data());
        RopeShiftTransposed(c, delta, n_slots, ld, kt16.data());
        int changed = 0;
        for (int64_t h = 0; h < c.n_heads; ++h) {
          for (int64_t d = 0; d < c.head_dim; ++d) {
            for (int64_t r = 0; r < ld; ++r) {
              const int64_t i = (h * c.head_dim + d) * ld + r;
              if (r < n_slots && d < c.rope_dim) {
                REQUIRE(kt16[i] == F32ToBF16(kt32[i]));
                changed += kt16[i] != kt16_0[i];
              } else {
                REQUIRE(kt16[i] == kt16_0[i]);  // past n_slots or rope_dim: untouched bits
              }
            }
          }
        }
        CHECK(changed > 0);
      }
    }
  }
}

}  // namespace rope_test
}  // namespace textgen::ops
