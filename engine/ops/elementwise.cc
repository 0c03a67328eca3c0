#include "engine/ops/elementwise.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/simd.h"

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// sum_i x[i]^2 in double. The products are exact in double (24-bit mantissas), so only the
// additions round, as in ggml's ggml_float loop (the order differs: 16 lanes, the last chunk
// zero-padded, then Vec16d's tree).
template <typename Isa>
double SumSquares(const float* x, int64_t d) {
  using V = simd::Vec16<Isa>;
  using D = simd::Vec16d<Isa>;
  D acc = D::Zero();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const D v = D::Widen(V::Load(x + i));
    acc = Fma(v, v, acc);
  }
  if (i < d) {
    const D v = D::Widen(V::LoadTail(x + i, d - i));
    acc = Fma(v, v, acc);
  }
  return ReduceAdd(acc);
}

template <typename Isa>
void RmsNormT(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out) {
  assert(d >= 1 && n >= 0);
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * d;
    float* o = out + r * d;
    const float mean = static_cast<float>(SumSquares<Isa>(xr, d) / static_cast<double>(d));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < d; ++i) o[i] = (xr[i] * scale) * w[i];
  }
}

// silu(g) * u = g / (1 + e^-g) * u on 16 lanes: for g -> -inf, e^-g = inf gives -0, as the
// scalar formula does.
template <typename Isa>
inline simd::Vec16<Isa> Silu16(simd::Vec16<Isa> g, simd::Vec16<Isa> u) {
  using V = simd::Vec16<Isa>;
  const V e = simd::Exp(Sub(V::Zero(), g));
  return Mul(Div(g, Add(V::Set1(1.0f), e)), u);
}

template <typename Isa>
void SiluMulT(float* gate, const float* up, int64_t count) {
  assert(count >= 0);
  using V = simd::Vec16<Isa>;
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) Silu16(V::Load(gate + i), V::Load(up + i)).Store(gate + i);
  if (i < count) {
    const int64_t m = count - i;
    Silu16(V::LoadTail(gate + i, m), V::LoadTail(up + i, m)).StoreTail(gate + i, m);
  }
}

void GeluTanhMulScalar(float* gate, const float* up, int64_t count) {
  assert(count >= 0);
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoef * g * g))) * up[i];
  }
}

void SwigluOaiMulScalar(float* gate, const float* up, int64_t count, float alpha, float limit) {
  assert(count >= 0);
  for (int64_t i = 0; i < count; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(alpha * -g)) * (u + 1.0f);
  }
}

void SoftCapScalar(float* x, int64_t count, float cap) {
  assert(cap > 0.0f);
  for (int64_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace

void RmsNorm(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out) {
  RmsNormT<simd::Native>(x, n, d, w, eps, out);
}

void SiluMul(float* gate, const float* up, int64_t count) {
  SiluMulT<simd::Native>(gate, up, count);
}

// GeluTanhMul and SoftCap stay scalar: std::tanh is one libm function for the whole process
// (its ifunc choice depends on the CPU, not on the kernel level) and the file is compiled
// without contraction, so every level computes the same float operations.
void GeluTanhMul(float* gate, const float* up, int64_t count) {
  GeluTanhMulScalar(gate, up, count);
}

// Scalar for the same reason as GeluTanhMul (one libm exp).
void SwigluOaiMul(float* gate, const float* up, int64_t count, float alpha, float limit) {
  SwigluOaiMulScalar(gate, up, count, alpha, limit);
}

void AddBias(float* x, int64_t n, int64_t d, const float* bias) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < d; ++i) x[r * d + i] += bias[i];
  }
}

void SoftCap(float* x, int64_t count, float cap) { SoftCapScalar(x, count, cap); }

void Add(float* acc, const float* x, int64_t count) {
  assert(count >= 0);
  for (int64_t i = 0; i < count; ++i) acc[i] += x[i];  // auto-vectorized
}

namespace portable {

void RmsNorm(const float* x, int64_t n, int64_t d, const float* w, float eps, float* out) {
  RmsNormT<simd::Portable>(x, n, d, w, eps, out);
}
void SiluMul(float* gate, const float* up, int64_t count) {
  SiluMulT<simd::Portable>(gate, up, count);
}
void GeluTanhMul(float* gate, const float* up, int64_t count) {
  GeluTanhMulScalar(gate, up, count);
}
void SwigluOaiMul(float* gate, const float* up, int64_t count, float alpha, float limit) {
  SwigluOaiMulScalar(gate, up, count, alpha, limit);
}
void SoftCap(float* x, int64_t count, float cap) { SoftCapScalar(x, count, cap); }

}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops
