#include "engine/ops/rope.h"

#include <cassert>
#include <cmath>
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

RopeScratch& Prepare(const RopeConfig& c) {
  assert(c.n_heads >= 1 && c.head_dim >= 1);
  assert(c.rope_dim >= 0 && c.rope_dim % 2 == 0 && c.rope_dim <= c.head_dim);
  thread_local RopeScratch s;
  const int64_t half = c.rope_dim / 2;
  s.inv_freq.resize(half);
  s.cos.resize(half);
  s.sin.resize(half);
  for (int64_t i = 0; i < half; ++i) {
    s.inv_freq[i] = static_cast<double>(c.freq_scale) *
                    std::pow(static_cast<double>(c.freq_base),
                             -2.0 * static_cast<double>(i) / static_cast<double>(c.rope_dim));
    if (c.freq_factors != nullptr) s.inv_freq[i] /= static_cast<double>(c.freq_factors[i]);
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

// Rotates one row [n_heads, head_dim] by the angles in s.
void RotateRow(const RopeConfig& c, const RopeScratch& s, float* row) {
  const int64_t half = c.rope_dim / 2;
  const int64_t stride = PairStride(c);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    float* v = row + h * c.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float* p = v + PairFirst(c, i);
      const float x0 = p[0];
      const float x1 = p[stride];
      p[0] = x0 * s.cos[i] - x1 * s.sin[i];
      p[stride] = x0 * s.sin[i] + x1 * s.cos[i];
    }
  }
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

void Rope(const RopeConfig& config, const int32_t* positions, int64_t n, float* x) {
  RopeScratch& s = Prepare(config);
  const int64_t row = config.n_heads * config.head_dim;
  for (int64_t r = 0; r < n; ++r) {
    Angles(config, s, positions[r], config.attn_factor);
    RotateRow(config, s, x + r * row);
  }
}

void RopeShift(const RopeConfig& config, int32_t delta, int64_t n, float* x) {
  RopeScratch& s = Prepare(config);
  const int64_t row = config.n_heads * config.head_dim;
  Angles(config, s, delta, 1.0);  // one angle set for all rows
  for (int64_t r = 0; r < n; ++r) RotateRow(config, s, x + r * row);
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
