#include "engine/ops/rope.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/ops/half.h"

namespace textgen::ops {
namespace {

// Per-thread tables for one call: inverse frequencies and the row's cos/sin.
struct RopeScratch {
  std::vector<double> inv_freq;
  std::vector<float> cos;
  std::vector<float> sin;
};

// ggml_rope_yarn_corr_dims: the pair range [lo, hi] over which YaRN's ramp goes from
// extrapolated to interpolated angles, computed in float as ggml does (the floor and ceil
// can depend on the last bit).
void YarnCorrDims(const RopeConfig& c, float* lo, float* hi) {
  const auto dim = [&](float beta) {
    return static_cast<float>(c.rope_dim) *
           std::log(static_cast<float>(c.yarn_orig_ctx) /
                    (beta * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(c.freq_base));
  };
  *lo = std::max(0.0f, std::floor(dim(c.yarn_beta_fast)));
  *hi = std::min(static_cast<float>(c.rope_dim - 1), std::ceil(dim(c.yarn_beta_slow)));
}

RopeScratch& Prepare(const RopeConfig& c) {
  assert(c.n_heads >= 1 && c.head_dim >= 1);
  assert(c.rope_dim >= 0 && c.rope_dim % 2 == 0 && c.rope_dim <= c.head_dim);
  thread_local RopeScratch s;
  const int64_t half = c.rope_dim / 2;
  s.inv_freq.resize(half);
  s.cos.resize(half);
  s.sin.resize(half);
  for (int64_t i = 0; i < half; ++i) {
    const double theta = std::pow(static_cast<double>(c.freq_base),
                                  -2.0 * static_cast<double>(i) / static_cast<double>(c.rope_dim));
    const double factor = c.freq_factors != nullptr ? c.freq_factors[i] : 1.0;
    s.inv_freq[i] = static_cast<double>(c.freq_scale) * theta;
    if (c.freq_factors != nullptr) s.inv_freq[i] /= factor;
    if (c.yarn_orig_ctx > 0) {
      // YaRN: the interpolated (scaled) and the extrapolated frequency, blended per pair.
      const double mix = YarnRamp(c, i);
      s.inv_freq[i] = s.inv_freq[i] * (1.0 - mix) + theta / factor * mix;
    }
  }
  return s;
}

// s.cos/s.sin for the angles pos * inv_freq, times `mscale`.
void Angles(const RopeConfig& c, RopeScratch& s, double pos, double mscale) {
  for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
    const double theta = pos * s.inv_freq[i];
    s.cos[i] = static_cast<float>(mscale * std::cos(theta));
    s.sin[i] = static_cast<float>(mscale * std::sin(theta));
  }
}

// Distance between the two elements of pair i, and the first one's index: (2i, 2i+1) or
// (i, i + half).
inline int64_t PairFirst(const RopeConfig& c, int64_t i) { return c.neox ? i : 2 * i; }
inline int64_t PairStride(const RopeConfig& c) { return c.neox ? c.rope_dim / 2 : 1; }

// Rotates one row [n_heads, head_dim] by the angles whose cos and sin are cs[i] and sn[i].
void RotateRow(const RopeConfig& c, const float* cs, const float* sn, float* row) {
  const int64_t half = c.rope_dim / 2;
  const int64_t stride = PairStride(c);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    float* v = row + h * c.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float* p = v + PairFirst(c, i);
      const float x0 = p[0];
      const float x1 = p[stride];
      p[0] = x0 * cs[i] - x1 * sn[i];
      p[stride] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

// Rope's cos/sin tables of recent positions, per thread. Why: every layer of a forward pass
// rotates q and k at the same positions with the same frequencies (and all beams of a step
// share one position), and computing them in double was ~2% of a beam-search step. Keyed by
// every input of the angles, frequency factors by value (a pointer may be reused by another
// model), so a hit gives the same floats as a fresh computation.
class AngleCache {
 public:
  // [2, rope_dim / 2]: cos, then sin of position pos under c.
  const float* Get(const RopeConfig& c, int32_t pos) {
    const int64_t half = c.rope_dim / 2;
    const size_t slot = static_cast<uint32_t>(pos) % kSlots;
    float* t = &table_[slot * 2 * static_cast<size_t>(half)];
    if (pos_[slot] != pos) {
      for (int64_t i = 0; i < half; ++i) {
        const double theta = static_cast<double>(pos) * inv_freq_[i];
        t[i] = static_cast<float>(static_cast<double>(c.attn_factor) * std::cos(theta));
        t[half + i] = static_cast<float>(static_cast<double>(c.attn_factor) * std::sin(theta));
      }
      pos_[slot] = pos;
    }
    return t;
  }

  bool Matches(const RopeConfig& c) const {
    if (c.rope_dim != rope_dim_ || c.freq_base != freq_base_ || c.freq_scale != freq_scale_ ||
        c.attn_factor != attn_factor_ || (c.freq_factors != nullptr) != !factors_.empty() ||
        c.yarn_orig_ctx != yarn_orig_ctx_ || c.yarn_beta_fast != yarn_beta_fast_ ||
        c.yarn_beta_slow != yarn_beta_slow_) {
      return false;
    }
    return c.freq_factors == nullptr ||
           std::equal(factors_.begin(), factors_.end(), c.freq_factors);
  }

  void Reset(const RopeConfig& c, const std::vector<double>& inv_freq) {
    rope_dim_ = c.rope_dim;
    freq_base_ = c.freq_base;
    freq_scale_ = c.freq_scale;
    attn_factor_ = c.attn_factor;
    yarn_orig_ctx_ = c.yarn_orig_ctx;
    yarn_beta_fast_ = c.yarn_beta_fast;
    yarn_beta_slow_ = c.yarn_beta_slow;
    factors_.clear();
    if (c.freq_factors != nullptr) factors_.assign(c.freq_factors, c.freq_factors + c.rope_dim / 2);
    inv_freq_ = inv_freq;
    table_.assign(kSlots * static_cast<size_t>(c.rope_dim), 0.0f);
    pos_.assign(kSlots, std::numeric_limits<int64_t>::min());
  }

 private:
  static constexpr size_t kSlots = 256;  // a 128-token prefill's q and k calls both hit
  int64_t rope_dim_ = -1;
  float freq_base_ = 0.0f, freq_scale_ = 0.0f, attn_factor_ = 0.0f;
  int64_t yarn_orig_ctx_ = 0;
  float yarn_beta_fast_ = 0.0f, yarn_beta_slow_ = 0.0f;
  std::vector<float> factors_;
  std::vector<double> inv_freq_;
  std::vector<float> table_;  // [kSlots, 2, rope_dim / 2]
  std::vector<int64_t> pos_;  // [kSlots] the position a slot holds
};

// The thread's cache for c: two, so that models alternating two RoPE settings by layer (Gemma
// 3's local and global layers) keep both.
AngleCache& CacheFor(const RopeConfig& c) {
  thread_local AngleCache caches[2];
  thread_local int last = 0;
  for (int k : {last, 1 - last}) {
    if (caches[k].Matches(c)) {
      last = k;
      return caches[k];
    }
  }
  last = 1 - last;  // replace the one not used last
  caches[last].Reset(c, Prepare(c).inv_freq);
  return caches[last];
}

inline float Load(float x) { return x; }
inline float Load(uint16_t x) { return half::Bf16ToF32(x); }
inline void Store(float v, float* x) { *x = v; }
inline void Store(float v, uint16_t* x) { *x = half::F32ToBf16(v); }

// RopeShiftTransposed over float or BF16 (uint16_t) elements.
template <typename T>
void ShiftTransposed(const RopeConfig& config, int32_t delta, int64_t n_slots, int64_t ld, T* kt) {
  assert(n_slots <= ld);
  RopeScratch& s = Prepare(config);
  Angles(config, s, delta, 1.0);
  for (int64_t h = 0; h < config.n_heads; ++h) {
    for (int64_t i = 0; i < config.rope_dim / 2; ++i) {
      T* x0 = kt + (h * config.head_dim + PairFirst(config, i)) * ld;  // [n_slots] first dim
      T* x1 = x0 + PairStride(config) * ld;                            // [n_slots] its partner
      const float c = s.cos[i];
      const float sn = s.sin[i];
      for (int64_t r = 0; r < n_slots; ++r) {
        const float a = Load(x0[r]);
        const float b = Load(x1[r]);
        Store(a * c - b * sn, &x0[r]);
        Store(a * sn + b * c, &x1[r]);
      }
    }
  }
}

}  // namespace

float YarnRamp(const RopeConfig& config, int64_t pair) {
  float lo, hi;
  YarnCorrDims(config, &lo, &hi);
  const float y = (static_cast<float>(pair) - lo) / std::max(0.001f, hi - lo);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

void Rope(const RopeConfig& config, const int32_t* positions, int64_t n, float* x) {
  if (config.rope_dim == 0 || n == 0) return;
  AngleCache& cache = CacheFor(config);
  const int64_t row = config.n_heads * config.head_dim;
  for (int64_t r = 0; r < n; ++r) {
    const float* t = cache.Get(config, positions[r]);
    RotateRow(config, t, t + config.rope_dim / 2, x + r * row);
  }
}

void RopeShift(const RopeConfig& config, int32_t delta, int64_t n, float* x) {
  RopeScratch& s = Prepare(config);
  const int64_t row = config.n_heads * config.head_dim;
  Angles(config, s, delta, 1.0);  // one angle set for all rows
  for (int64_t r = 0; r < n; ++r) RotateRow(config, s.cos.data(), s.sin.data(), x + r * row);
}

void RopeShiftTransposed(const RopeConfig& config, int32_t delta, int64_t n_slots, int64_t ld,
                         float* kt) {
  ShiftTransposed(config, delta, n_slots, ld, kt);
}

void RopeShiftTransposed(const RopeConfig& config, int32_t delta, int64_t n_slots, int64_t ld,
                         uint16_t* kt) {
  ShiftTransposed(config, delta, n_slots, ld, kt);
}

}  // namespace textgen::ops
