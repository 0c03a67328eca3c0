// This level's kernel catalogue (format_kernels.h): compiled once per level, like the kernels,
// so every runner below calls its own level's kernels directly.
#include "engine/ops/format_kernels.h"

#include <array>
#include <vector>

#include "engine/ops/direct_matmul.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/gemv_blocking.h"
#include "engine/ops/gemv_float.h"
#include "engine/ops/half.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/packed_activations.h"
#include "engine/ops/q8_0_gemv.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/quant_gemv.h"
#include "engine/ops/simd.h"

#if !defined(TEXTGEN_ISA_LEVEL)
#error "format_kernels.cc is compiled once per level, with -DTEXTGEN_ISA_LEVEL=<level>"
#endif

namespace textgen::ops {
TG_ISA_BEGIN
namespace {

// Every runner: y rows [i0, i1) x columns [r0, r1) from activation rows [i0, i1), over
// RunGemvBlocks' ranges; `x_row_bytes` is what one converted activation row occupies.
template <typename Kernel>
void Blocks(const WeightView& w, int64_t n, int64_t x_row_bytes, int threads, Kernel&& kernel) {
  RunGemvBlocks(n, w.out, x_row_bytes, static_cast<int64_t>(w.row_bytes()), threads, kernel);
}

// --- exact mode (--compute f32): F32 activations.

void F32Exact(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  Blocks(w, n, w.in * 4, threads, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    DirectMatmulF32Strided(reinterpret_cast<const float*>(w.row(r0)), r1 - r0, w.in, x + i0 * w.in,
                           i1 - i0, y + i0 * w.out + r0, w.out);
  });
}

// The exact kernels that share GemvF16's signature (y rows and columns addressed by the kernel).
template <void (*kGemv)(const WeightView&, const float*, int64_t, float*, int64_t, int64_t,
                        int64_t)>
void RowsExact(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  Blocks(w, n, w.in * 4, threads, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    kGemv(w, x + i0 * w.in, i1 - i0, y + i0 * w.out, w.out, r0, r1);
  });
}

// --- fast mode (--compute bf16).

// Q8_0 weights x Q8_0 activations: int8 dot products, one reduction order at every level.
void Q8_0Fast(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  // Activations quantized once per call, shared read-only by all threads: xq [n, in/32].
  thread_local std::vector<BlockQ8_0> xq;
  const int64_t nb = w.in / kQ8_0Block;
  xq.resize(static_cast<size_t>(n * nb));
  QuantizeActivationsQ8_0(x, n, w.in, xq.data());
  const BlockQ8_0* q = xq.data();
  // Repacked once here for the AVX-512 tiles, not by each thread range.
  thread_local PackedActivations xp;
  const PackedActivations* packed = PackQ8_0Vnni(q, n, nb, &xp) ? &xp : nullptr;
  Blocks(w, n, nb * sizeof(BlockQ8_0), threads,
         [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
           GemvQ8_0VnniPacked(w, q, packed, i0, i1 - i0, y + i0 * w.out, w.out, r0, r1);
         });
}

// The K-quants and IQ4_XS x Q8_K activations.
void KQuantFast(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  // Activations quantized to Q8_K once per call, shared by all threads: xk [n, in/256].
  thread_local std::vector<BlockQ8_K> xk;
  const int64_t nb = w.in / kQkK;
  xk.resize(static_cast<size_t>(n * nb));
  QuantizeActivationsQ8_K(x, n, w.in, xk.data());
  const BlockQ8_K* q = xk.data();
  // Prepared once here for the AVX-512 tiles, not by each thread range.
  thread_local KQuantPrepared prep;
  const KQuantPrepared* prepared = PrepareKQuantInt8(w.type, q, n, nb, &prep) ? &prep : nullptr;
  Blocks(w, n, nb * sizeof(BlockQ8_K), threads,
         [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
           GemvKQuantInt8Prepared(w, q, prepared, i0, i1 - i0, y + i0 * w.out, w.out, r0, r1);
         });
}

// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 x Q8_1 activations.
void SmallQuantFast(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  // Activations quantized to Q8_1 blocks once per call: xs [n, in/32].
  thread_local std::vector<BlockQ8_1> xs;
  const int64_t nb = w.in / kQkSmall;
  xs.resize(static_cast<size_t>(n * nb));
  QuantizeActivationsQ8_1(x, n, w.in, xs.data());
  const BlockQ8_1* q = xs.data();
  // Repacked once here for the AVX-512 tiles, not by each thread range.
  thread_local PackedActivations xp;
  const PackedActivations* packed = PackSmallQuantInt8(w.type, q, n, nb, &xp) ? &xp : nullptr;
  Blocks(w, n, nb * sizeof(BlockQ8_1), threads,
         [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
           GemvSmallQuantInt8Packed(w, q, packed, i0, i1 - i0, y + i0 * w.out, w.out, r0, r1);
         });
}

// Activations rounded to BF16 once per call: [n, in].
const uint16_t* RoundedActivations(const float* x, int64_t count) {
  thread_local std::vector<uint16_t> xb;
  xb.resize(static_cast<size_t>(count));
  ToBf16Activations(x, count, xb.data());
  return xb.data();
}

// BF16 weights x BF16 activations by VDPBF16PS (where the level has it; GemvBf16Dot's
// fallback elsewhere).
void Bf16Dot(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  const uint16_t* b = RoundedActivations(x, n * w.in);
  Blocks(w, n, w.in * 4, threads, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    GemvBf16Dot(w, b + i0 * w.in, i1 - i0, y + i0 * w.out, w.out, r0, r1);
  });
}

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

// The same products as Bf16Dot, as F32 FMAs: the activations, rounded to BF16, are widened
// back to F32 (exact) once per call, xf [n, in], so GemvBf16's products are exact BF16 x BF16
// products as VDPBF16PS's are.
void Bf16InF32(const WeightView& w, const float* x, int64_t n, float* y, int threads) {
  const uint16_t* b = RoundedActivations(x, n * w.in);
  thread_local std::vector<float> xf;
  xf.resize(static_cast<size_t>(n * w.in));
  WidenBf16(b, n * w.in, xf.data());
  const float* f = xf.data();  // not xf in the lambda: a worker would see its own copy
  Blocks(w, n, w.in * 4, threads, [&](int64_t i0, int64_t i1, int64_t r0, int64_t r1) {
    GemvBf16(w, f + i0 * w.in, i1 - i0, y + i0 * w.out, w.out, r0, r1);
  });
}

constexpr int Slot(WeightType t) { return static_cast<int>(t); }

// Not constexpr: MakeCatalogue calls it, which stops the compile, when a format has no entry.
void EveryWeightTypeNeedsACatalogueEntry() {}

// The one list: per format, its exact entry, its fast entry, and whether the fast entry gives
// the same bytes at every level.
constexpr FormatCatalogue MakeCatalogue() {
  using A = ActivationKind;
  constexpr FormatMatmulEntry kF32{A::kF32, &F32Exact};
  constexpr FormatMatmulEntry kF16{A::kF32, &RowsExact<GemvF16>};
  constexpr FormatMatmulEntry kBf16{A::kF32, &RowsExact<GemvBf16>};
  constexpr FormatMatmulEntry kQ8_0{A::kF32, &RowsExact<GemvQ8_0Exact>};
  constexpr FormatMatmulEntry kQuant{A::kF32, &RowsExact<GemvQuantExact>};
  constexpr FormatMatmulEntry kSmall{A::kQ8_1, &SmallQuantFast};
  constexpr FormatMatmulEntry kKQuant{A::kQ8_K, &KQuantFast};
  FormatCatalogue c{};
  bool filled[kWeightTypeCount] = {};
  auto put = [&](WeightType t, const FormatKernels& f) {
    c[Slot(t)] = f;
    filled[Slot(t)] = true;
  };
  // Weights Linear converts to BF16 in the fast mode keep their exact kernel there.
  put(WeightType::kF32, {kF32, kF32, kF32, false});
  put(WeightType::kF16, {kF16, kF16, kF16, false});
  put(WeightType::kBf16, {kBf16, {A::kBf16, &Bf16Dot}, {A::kBf16InF32, &Bf16InF32}, false});
  {
    const FormatMatmulEntry fast{A::kQ8_0, &Q8_0Fast};
    put(WeightType::kQ8_0, {kQ8_0, fast, fast, true});
  }
  for (WeightType t : {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0, WeightType::kQ5_1,
                       WeightType::kIQ4_NL, WeightType::kMXFP4}) {
    put(t, {kQuant, kSmall, kSmall, false});
  }
  for (WeightType t : {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kQ4_K, WeightType::kQ5_K,
                       WeightType::kQ6_K, WeightType::kIQ4_XS}) {
    put(t, {kQuant, kKQuant, kKQuant, false});
  }
  // Every slot filled (no function-pointer comparisons: ASan builds cannot fold them).
  for (bool f : filled) {
    if (!f) EveryWeightTypeNeedsACatalogueEntry();
  }
  return c;
}

}  // namespace

// Constant-initialized: the level's KernelTable holds its address.
extern const FormatCatalogue kFormatKernels;
constexpr FormatCatalogue kFormatKernels = MakeCatalogue();

TG_ISA_END
}  // namespace textgen::ops
