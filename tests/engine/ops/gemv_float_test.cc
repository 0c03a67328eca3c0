#include "engine/ops/gemv_float.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/format/dtype.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace gemv_float_test {

using testing::Expected;
using testing::ExpectRowRange;
using testing::Random;
using testing::RowRangeCall;

using GemvFn = void (*)(const WeightView&, const float*, int64_t, float*, int64_t, int64_t,
                        int64_t);

// A weight matrix stored as `type`, and its values as dtype.h's converters read them.
struct Weights {
  WeightType type;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [out, in]
};

Weights MakeWeights(WeightType type, int64_t out, int64_t in, uint32_t seed) {
  const std::vector<float> f = Random(out * in, seed);
  Weights w{type, {}, std::vector<float>(f.size())};
  if (type == WeightType::kF32) {
    w.bytes.resize(f.size() * 4);
    std::memcpy(w.bytes.data(), f.data(), w.bytes.size());
    w.values = f;
    return w;
  }
  w.bytes.resize(f.size() * 2);
  for (size_t k = 0; k < f.size(); ++k) {
    const uint16_t h = type == WeightType::kF16 ? F32ToF16(f[k]) : F32ToBF16(f[k]);
    std::memcpy(w.bytes.data() + 2 * k, &h, 2);
    w.values[k] = type == WeightType::kF16 ? F16ToF32(h) : BF16ToF32(h);
  }
  return w;
}

struct Shape {
  int64_t out, in;
};
// Row lengths with and without a partial 16-lane tail; odd row counts.
constexpr Shape kShapes[] = {{1, 1}, {3, 5}, {7, 16}, {37, 33}, {13, 800}, {9, 4096}, {21, 100}};

void CheckGemv(WeightType type, GemvFn fn) {
  for (const Shape& s : kShapes) {
    const Weights w = MakeWeights(type, s.out, s.in, 1 + s.out + s.in);
    const WeightView view{type, w.bytes.data(), s.out, s.in};
    for (int64_t n = 1; n <= 9; ++n) {
      const std::vector<float> x = Random(n * s.in, 100 + n);
      std::vector<std::pair<int64_t, int64_t>> ranges = {{0, s.out}};
      if (s.out >= 3) ranges.push_back({s.out / 3, s.out - 1});
      for (auto [r0, r1] : ranges) {
        INFO(std::string(WeightTypeName(type)) << " shape [" << s.out << ", " << s.in << "] n=" << n
                                               << " rows [" << r0 << ", " << r1 << ")");
        const RowRangeCall call = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
          fn(view, x.data(), n, y, ldy, a, b);
        };
        ExpectRowRange(call, n, s.out + 3, r0, r1, 1e-5, [&](int64_t i, int64_t r) {
          Expected e;
          for (int64_t k = 0; k < s.in; ++k) {
            const double p = static_cast<double>(x[i * s.in + k]) * w.values[r * s.in + k];
            e.value += p;
            e.mag += std::fabs(p);
          }
          return e;
        });
      }
    }
  }
}

TEST_CASE("GemvF16 matches a double reference") { CheckGemv(WeightType::kF16, &GemvF16); }
TEST_CASE("GemvBf16 matches a double reference") { CheckGemv(WeightType::kBf16, &GemvBf16); }
TEST_CASE("GemvF32 matches a double reference") { CheckGemv(WeightType::kF32, &GemvF32); }

TEST_CASE("portable GemvF16/GemvBf16/GemvF32 match a double reference") {
  CheckGemv(WeightType::kF16, &portable::GemvF16);
  CheckGemv(WeightType::kBf16, &portable::GemvBf16);
  CheckGemv(WeightType::kF32, &portable::GemvF32);
}

// One reduction order at every level (issue 32): 16 lanes by FMA in k order, the same lane
// tree, the masked tail's zero FMAs; so the level a CPU runs never changes an answer.
TEST_CASE("GemvF16/GemvBf16/GemvF32 give the portable kernel's bytes at this level") {
  std::mt19937 rng(91);
  const struct {
    WeightType type;
    GemvFn fn, portable_fn;
  } kernels[] = {{WeightType::kF16, &GemvF16, &portable::GemvF16},
                 {WeightType::kBf16, &GemvBf16, &portable::GemvBf16},
                 {WeightType::kF32, &GemvF32, &portable::GemvF32}};
  for (const auto& k : kernels) {
    for (int trial = 0; trial < 60; ++trial) {
      // Every tail length 0..15 and 8 +- 1, short and long rows, 1-9 activation rows.
      const int64_t in = trial < 40 ? 1 + trial : 16 * (1 + rng() % 200) + rng() % 16;
      const int64_t out = 1 + rng() % 40, n = 1 + rng() % 9;
      INFO(WeightTypeName(k.type) << " trial " << trial << " in " << in << " out " << out << " n "
                                  << n);
      const Weights w = MakeWeights(k.type, out, in, rng());
      std::vector<float> x = Random(n * in, rng());
      if (trial % 5 == 4) {  // signed zeros, huge and tiny values, cancellation
        for (size_t j = 0; j < x.size(); ++j) {
          x[j] = j % 3 == 0 ? -0.0f : (j % 3 == 1 ? x[j] * 1e30f : x[j] * 1e-30f);
        }
      }
      const WeightView view{k.type, w.bytes.data(), out, in};
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      std::vector<float> want(n * out, -1.0f), got(n * out, -1.0f);
      k.portable_fn(view, x.data(), n, want.data(), out, r0, r1);
      k.fn(view, x.data(), n, got.data(), out, r0, r1);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("GemvF16 widens subnormal and large half weights exactly") {
  // Values whose products are exact in float, so the sum must be exact too: a wrong
  // subnormal or exponent conversion would show.
  const std::vector<uint16_t> h = {0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x8001, 0x3c00};
  const int64_t in = static_cast<int64_t>(h.size());
  const WeightView view{WeightType::kF16, h.data(), 1, in};
  for (int64_t k = 0; k < in; ++k) {
    std::vector<float> x(in, 0.0f);
    x[k] = 1.0f;
    float y = 0.0f;
    GemvF16(view, x.data(), 1, &y, 1, 0, 1);
    CHECK(y == F16ToF32(h[k]));
  }
}

TEST_CASE("Float GEMVs give bit-identical rows however the call is split") {
  const int64_t out = 37, in = 100, n = 6;
  const std::vector<float> x = Random(n * in, 7);
  for (auto [type, fn] :
       {std::pair{WeightType::kF16, &GemvF16}, std::pair{WeightType::kBf16, &GemvBf16},
        std::pair{WeightType::kF32, &GemvF32}}) {
    INFO(WeightTypeName(type));
    const Weights w = MakeWeights(type, out, in, 8);
    const WeightView view{type, w.bytes.data(), out, in};
    const RowRangeCall call = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
      fn(view, x.data(), n, y, ldy, a, b);
    };
    const std::vector<float> all = testing::RunAll(call, n, out);
    CHECK(testing::RunSplit(call, n, out, {1, 6, 7, 19, 30}) == all);
    std::vector<float> one(n * out);
    for (int64_t i = 0; i < n; ++i)
      fn(view, x.data() + i * in, 1, one.data() + i * out, out, 0, out);
    CHECK(one == all);
  }
}

}  // namespace gemv_float_test
}  // namespace textgen::ops
