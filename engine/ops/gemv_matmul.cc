#include "engine/ops/gemv_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/ops/direct_matmul.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/gemv_blocking.h"
#include "engine/ops/gemv_float.h"
#include "engine/ops/half.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_table.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_dot_more.h"
#include "engine/ops/q8_0_gemv.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/quant_gemv.h"
#include "engine/ops/threading.h"

namespace textgen::ops {
namespace {

// dst[i] = the F32 value of BF16 src[i] (exact).
void WidenBf16(const uint16_t* src, int64_t count, float* dst) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
#endif
  for (; i < count; ++i) dst[i] = half::Bf16ToF32(src[i]);
}

}  // namespace

void RunQ8_0Int8(const KernelTable& k, const WeightView& w, const float* x, int64_t n, float* y,
                 int threads) {
  const int64_t out = w.out, in = w.in;
  // Activations quantized once per call, shared read-only by all threads: xq [n, in/32].
  thread_local std::vector<BlockQ8_0> xq;
  const int64_t nb = in / kQ8_0Block;
  xq.resize(static_cast<size_t>(n * nb));
  k.quantize_activations_q8_0(x, n, in, xq.data());
  const BlockQ8_0* q = xq.data();
  // Repacked once here for the AVX-512 tiles, not by each thread range.
  thread_local PackedActivations xp;
  const PackedActivations* packed = k.pack_q8_0_vnni(q, n, nb, &xp) ? &xp : nullptr;
  RunGemvBlocks(n, out, nb * sizeof(BlockQ8_0), static_cast<int64_t>(w.row_bytes()), threads,
                [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
                  k.gemv_q8_0_vnni_packed(w, q, packed, i0, i1 - i0, y + i0 * out, out, r0, r1);
                });
}

absl::Status GemvMatmul::Run(const float* x, int64_t n, float* y) const {
  const int64_t out = w_.out, in = w_.in;
  // Threads once the call streams parallel_min_bytes of weights (once per 4 activation rows).
  const int64_t streamed = static_cast<int64_t>(w_.bytes()) * std::max<int64_t>(1, n / 4);
  const int threads = streamed >= parallel_min_bytes_ ? NumThreads() : 1;
  const int64_t wrb = static_cast<int64_t>(w_.row_bytes());
  // Every branch: y rows [i0, i1) x columns [r0, r1) from the activations of rows [i0, i1).
  auto blocks = [&](int64_t x_row_bytes, auto kernel) {
    RunGemvBlocks(n, out, x_row_bytes, wrb, threads, kernel);
  };
  if (Vnni()) {
    RunQ8_0Int8(internal::KernelsFor(WeightType::kQ8_0, n), w_, x, n, y, threads);
    return absl::OkStatus();
  }
  if (KQuantInt8()) {
    // Activations quantized to Q8_K once per call, shared by all threads: xq [n, in/256].
    thread_local std::vector<BlockQ8_K> xk;
    const int64_t nb = in / kQkK;
    xk.resize(static_cast<size_t>(n * nb));
    QuantizeActivationsQ8_K(x, n, in, xk.data());
    const BlockQ8_K* q = xk.data();
    // Prepared once here for the AVX-512 tiles, not by each thread range.
    thread_local KQuantPrepared prep;
    const KQuantPrepared* prepared = PrepareKQuantInt8(w_.type, q, n, nb, &prep) ? &prep : nullptr;
    blocks(nb * sizeof(BlockQ8_K), [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
      GemvKQuantInt8Prepared(w_, q, prepared, i0, i1 - i0, y + i0 * out, out, r0, r1);
    });
    return absl::OkStatus();
  }
  if (SmallQuantInt8()) {
    // Activations quantized to Q8_0 / Q8_1 blocks once per call: xs [n, in/32].
    thread_local std::vector<BlockQ8_1> xs;
    const int64_t nb = in / kQkSmall;
    xs.resize(static_cast<size_t>(n * nb));
    QuantizeActivationsQ8_1(x, n, in, xs.data());
    const BlockQ8_1* q = xs.data();
    // Repacked once here for the AVX-512 tiles, not by each thread range.
    thread_local PackedActivations xp;
    const PackedActivations* packed = PackSmallQuantInt8(w_.type, q, n, nb, &xp) ? &xp : nullptr;
    blocks(nb * sizeof(BlockQ8_1), [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
      GemvSmallQuantInt8Packed(w_, q, packed, i0, i1 - i0, y + i0 * out, out, r0, r1);
    });
    return absl::OkStatus();
  }
  if (Bf16Dot()) {
    // Activations rounded to BF16 once per call: xb [n, in].
    thread_local std::vector<uint16_t> xb;
    xb.resize(static_cast<size_t>(n * in));
    ToBf16Activations(x, n * in, xb.data());
    const uint16_t* b = xb.data();
    if (bf16_dot_in_f32_) {
      // Widened back to F32 (exact) once per call, xf [n, in]: the products of GemvBf16's F32
      // FMAs are then exact BF16 x BF16 products, as VDPBF16PS's are.
      thread_local std::vector<float> xf;
      xf.resize(static_cast<size_t>(n * in));
      WidenBf16(b, n * in, xf.data());
      const float* f = xf.data();  // not xf in the lambda: a worker would see its own copy
      blocks(in * 4, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
        GemvBf16(w_, f + i0 * in, i1 - i0, y + i0 * out, out, r0, r1);
      });
      return absl::OkStatus();
    }
    blocks(in * 4, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
      GemvBf16Dot(w_, b + i0 * in, i1 - i0, y + i0 * out, out, r0, r1);
    });
    return absl::OkStatus();
  }
  blocks(in * 4, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    const float* xi = x + i0 * in;
    float* yi = y + i0 * out;
    const int64_t m = i1 - i0;
    switch (w_.type) {
      case WeightType::kF32:
        DirectMatmulF32Strided(reinterpret_cast<const float*>(w_.row(r0)), r1 - r0, in, xi, m,
                               yi + r0, out);
        break;
      case WeightType::kF16:
        GemvF16(w_, xi, m, yi, out, r0, r1);
        break;
      case WeightType::kBf16:
        GemvBf16(w_, xi, m, yi, out, r0, r1);
        break;
      case WeightType::kQ8_0:
        GemvQ8_0Exact(w_, xi, m, yi, out, r0, r1);
        break;
      default:
        GemvQuantExact(w_, xi, m, yi, out, r0, r1);
        break;
    }
  });
  return absl::OkStatus();
}

std::string GemvMatmul::Name() const {
  return absl::StrCat("gemv:", WeightTypeName(w_.type),
                      Vnni() || KQuantInt8() || SmallQuantInt8()
                          ? ":vnni"
                          : (Bf16Dot() ? (bf16_dot_in_f32_ ? ":bf16-in-f32" : ":bf16") : ":f32"));
}

}  // namespace textgen::ops
