// The kernel catalogue: every level holds an entry of every format, the levels agree on what
// each entry is, each entry computes its format's matmul, GemvMatmul runs the entry, and every
// format marked one-order gives the same bytes at every level this CPU runs.
#include "engine/ops/format_kernels.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/format/dtype.h"
#include "engine/ops/gemv_matmul.h"
#include "engine/ops/half.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/kernel_table.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace format_kernels_test {

// Random weights [out, in] of `t` as bytes, and their F32 values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  WeightView view;
};

Weights MakeWeights(WeightType t, int64_t out, int64_t in, uint32_t seed) {
  Weights w;
  const std::vector<float> f = testing::Random(static_cast<size_t>(out * in), seed);
  switch (t) {
    case WeightType::kF32:
      w.bytes.resize(f.size() * 4);
      std::memcpy(w.bytes.data(), f.data(), w.bytes.size());
      break;
    case WeightType::kF16:
    case WeightType::kBf16: {
      std::vector<uint16_t> h(f.size());
      for (size_t i = 0; i < f.size(); ++i) {
        h[i] = t == WeightType::kF16 ? half::F32ToF16(f[i]) : half::F32ToBf16(f[i]);
      }
      w.bytes.resize(h.size() * 2);
      std::memcpy(w.bytes.data(), h.data(), w.bytes.size());
      break;
    }
    case WeightType::kQ8_0: {
      const std::vector<BlockQ8_0> b = testing::RandomBlocks(out * in / kQ8_0Block, seed, 0.05f);
      w.bytes.resize(b.size() * sizeof(BlockQ8_0));
      std::memcpy(w.bytes.data(), b.data(), w.bytes.size());
      break;
    }
    default:
      w.bytes = testing::RandomQuantRows(t, out, in, seed);
      break;
  }
  w.values.resize(static_cast<size_t>(out * in));
  ToF32(t, w.bytes.data(), w.values.data(), out * in);
  w.view = WeightView{t, w.bytes.data(), out, in};
  return w;
}

// What a call's activations become in each mode, as the spec of the catalogue says.
std::string FastKind(WeightType t, bool bf16_in_f32) {
  switch (t) {
    case WeightType::kF32:
    case WeightType::kF16:
      return "f32";
    case WeightType::kBf16:
      return bf16_in_f32 ? "bf16-in-f32" : "bf16";
    case WeightType::kQ8_0:
      return "q8_0";
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kIQ4_NL:
    case WeightType::kMXFP4:
      return "q8_1";
    default:
      return "q8_k";
  }
}

TEST_CASE("every built level's catalogue has every format, and the levels agree on each entry") {
  const auto tables = internal::BuiltKernelTables();
  REQUIRE(!tables.empty());
  for (int i = 0; i < kWeightTypeCount; ++i) {
    const auto t = static_cast<WeightType>(i);
    const FormatKernels& first = FormatOf(*tables[0], t);
    for (const KernelTable* k : tables) {
      INFO(k->level << " " << WeightTypeName(t));
      const FormatKernels& f = FormatOf(*k, t);
      CHECK(f.exact.run != nullptr);
      CHECK(f.fast.run != nullptr);
      CHECK(f.fast_in_f32.run != nullptr);
      CHECK(f.exact.activations == ActivationKind::kF32);
      CHECK(f.fast.activations == first.fast.activations);
      CHECK(f.fast_in_f32.activations == first.fast_in_f32.activations);
      CHECK(f.one_order == first.one_order);
      CHECK(std::string(ActivationKindName(f.fast.activations)) == FastKind(t, false));
      CHECK(std::string(ActivationKindName(f.fast_in_f32.activations)) == FastKind(t, true));
    }
  }
}

// Each entry computes y = x . w^T of its own format: within the error of its activation
// conversion of the exact value over the weights' F32 values (a mis-wired entry, e.g. a Q4_0
// weight read by a K-quant kernel, is off by far more).
TEST_CASE("each catalogue entry of this level computes its format's matmul") {
  const int64_t out = 37, in = 512;
  for (int i = 0; i < kWeightTypeCount; ++i) {
    const auto t = static_cast<WeightType>(i);
    const Weights w = MakeWeights(t, out, in, 100 + i);
    for (int64_t n : {1, 3, 4, 9}) {
      const std::vector<float> x = testing::Random(static_cast<size_t>(n * in), 200 + i);
      for (int mode = 0; mode < 3; ++mode) {
        const bool fast = mode > 0, in_f32 = mode == 2;
        const FormatMatmulEntry& e = MatmulEntry(internal::Kernels(), t, fast, in_f32);
        INFO(WeightTypeName(t) << " n " << n << " entry " << ActivationKindName(e.activations));
        std::vector<float> y(static_cast<size_t>(n * out), testing::kSentinel);
        e.run(w.view, x.data(), n, y.data(), 2);
        // Q8_K / Q8_1 / Q8_0 activations carry ~1/254 of each block's largest value.
        const double tol = e.activations == ActivationKind::kF32 ? 1e-5 : 2e-2;
        int64_t bad = 0;
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t c = 0; c < out; ++c) {
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < in; ++k) {
              const double p = static_cast<double>(x[r * in + k]) * w.values[c * in + k];
              ref += p;
              mag += std::fabs(p);
            }
            bad += !(std::fabs(y[r * out + c] - ref) <= tol * mag + 1e-30);
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("GemvMatmul runs its format's catalogue entry, and is named after it") {
  const int64_t out = 40, in = 256;
  for (int i = 0; i < kWeightTypeCount; ++i) {
    const auto t = static_cast<WeightType>(i);
    const Weights w = MakeWeights(t, out, in, 300 + i);
    const std::vector<float> x = testing::Random(static_cast<size_t>(2 * in), 400 + i);
    for (LinearCompute compute : {LinearCompute::kF32, LinearCompute::kBf16}) {
      for (bool in_f32 : {false, true}) {
        const bool fast = compute == LinearCompute::kBf16;
        GemvMatmul gemv(w.view, compute, 0, in_f32);
        const FormatMatmulEntry& e = MatmulEntry(internal::KernelsFor(t, 2), t, fast, in_f32);
        INFO(gemv.Name());
        CHECK(gemv.Name() == std::string("gemv:") + WeightTypeName(t) + ":" +
                                 (fast ? FastKind(t, in_f32) : "f32"));
        std::vector<float> want(static_cast<size_t>(2 * out)), got(want.size());
        e.run(w.view, x.data(), 2, want.data(), 1);
        REQUIRE(gemv.Run(x.data(), 2, got.data()).ok());
        CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
      }
    }
  }
}

// The choice among levels changes speed, never answers.
TEST_CASE("every one-order format gives the same bytes at every level this CPU runs") {
  REQUIRE(!FormatsWithOneOrder().empty());
  const int64_t out = 53, in = 1024;
  for (WeightType t : FormatsWithOneOrder()) {
    const Weights w = MakeWeights(t, out, in, 500);
    for (int64_t n : {1, 2, 3, 4, 5, 9}) {
      const std::vector<float> x = testing::Random(static_cast<size_t>(n * in), 600 + n);
      std::vector<float> want;
      for (const KernelTable* k : internal::RunnableKernelTables()) {
        INFO(WeightTypeName(t) << " level " << k->level << " n " << n);
        std::vector<float> y(static_cast<size_t>(n * out), testing::kSentinel);
        MatmulEntry(*k, t, /*fast=*/true, Bf16DotInF32()).run(w.view, x.data(), n, y.data(), 2);
        if (want.empty()) want = y;
        CHECK(std::memcmp(want.data(), y.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace format_kernels_test
}  // namespace textgen::ops
