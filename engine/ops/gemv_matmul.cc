#include "engine/ops/gemv_matmul.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/ops/direct_matmul.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/gemv_float.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_dot_more.h"
#include "engine/ops/q8_0_gemv.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/quant_gemv.h"
#include "engine/ops/threading.h"

namespace textgen::ops {
namespace {

// Rows per range start: whole register tiles (the kernels take up to 8 weight rows per tile).
constexpr int64_t kRowAlign = 16;

}  // namespace

absl::Status GemvMatmul::Run(const float* x, int64_t n, float* y) const {
  const int64_t out = w_.out, in = w_.in;
  const int threads = static_cast<int64_t>(w_.bytes()) >= parallel_min_bytes_ ? NumThreads() : 1;
  if (Vnni()) {
    // Activations quantized once per call, shared read-only by all threads: xq [n, in/32].
    thread_local std::vector<BlockQ8_0> xq;
    xq.resize(static_cast<size_t>(n * (in / kQ8_0Block)));
    QuantizeActivationsQ8_0(x, n, in, xq.data());
    const BlockQ8_0* q = xq.data();
    ParallelFor(out, kRowAlign, threads,
                [&](int64_t r0, int64_t r1) { GemvQ8_0Vnni(w_, q, n, y, out, r0, r1); });
    return absl::OkStatus();
  }
  if (KQuantInt8()) {
    // Activations quantized to Q8_K once per call, shared by all threads: xq [n, in/256].
    thread_local std::vector<BlockQ8_K> xk;
    xk.resize(static_cast<size_t>(n * (in / kQkK)));
    QuantizeActivationsQ8_K(x, n, in, xk.data());
    const BlockQ8_K* q = xk.data();
    const bool more = !HasKQuantInt8(w_.type);
    ParallelFor(out, kRowAlign, threads, [&](int64_t r0, int64_t r1) {
      if (more) {
        GemvKQuantInt8More(w_, q, n, y, out, r0, r1);
      } else {
        GemvKQuantInt8(w_, q, n, y, out, r0, r1);
      }
    });
    return absl::OkStatus();
  }
  if (SmallQuantInt8()) {
    // Activations quantized to Q8_0 / Q8_1 blocks once per call: xs [n, in/32].
    thread_local std::vector<BlockQ8_1> xs;
    xs.resize(static_cast<size_t>(n * (in / kQkSmall)));
    QuantizeActivationsQ8_1(x, n, in, xs.data());
    const BlockQ8_1* q = xs.data();
    ParallelFor(out, kRowAlign, threads,
                [&](int64_t r0, int64_t r1) { GemvSmallQuantInt8(w_, q, n, y, out, r0, r1); });
    return absl::OkStatus();
  }
  if (Bf16Dot()) {
    // Activations rounded to BF16 once per call: xb [n, in].
    thread_local std::vector<uint16_t> xb;
    xb.resize(static_cast<size_t>(n * in));
    ToBf16Activations(x, n * in, xb.data());
    const uint16_t* b = xb.data();
    ParallelFor(out, kRowAlign, threads,
                [&](int64_t r0, int64_t r1) { GemvBf16Dot(w_, b, n, y, out, r0, r1); });
    return absl::OkStatus();
  }
  ParallelFor(out, kRowAlign, threads, [&](int64_t r0, int64_t r1) {
    switch (w_.type) {
      case WeightType::kF32:
        DirectMatmulF32Strided(reinterpret_cast<const float*>(w_.row(r0)), r1 - r0, in, x, n,
                               y + r0, out);
        break;
      case WeightType::kF16:
        GemvF16(w_, x, n, y, out, r0, r1);
        break;
      case WeightType::kBf16:
        GemvBf16(w_, x, n, y, out, r0, r1);
        break;
      case WeightType::kQ8_0:
        GemvQ8_0Exact(w_, x, n, y, out, r0, r1);
        break;
      default:
        GemvQuantExact(w_, x, n, y, out, r0, r1);
        break;
    }
  });
  return absl::OkStatus();
}

std::string GemvMatmul::Name() const {
  return absl::StrCat(
      "gemv:", WeightTypeName(w_.type),
      Vnni() || KQuantInt8() || SmallQuantInt8() ? ":vnni" : (Bf16Dot() ? ":bf16" : ":f32"));
}

}  // namespace textgen::ops
