// The block-format weight kernels (Q4_0 ... IQ4_XS) against dequantize-then-F32 (engine/format's
// dequantizer, itself bit-exact with llama.cpp): the widening, the exact decode GEMV and Linear
// on its few-row and many-row paths, on random shapes, row ranges and row counts.
#include "engine/ops/quant_gemv.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/ops/linear.h"
#include "engine/ops/quant_decode.h"
#include "engine/ops/weight_convert.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace quant_gemv_test {

using testing::Dequantize;
using testing::kQuantTypes;
using testing::RandomQuantRows;

TEST_CASE("DecodeRowF32 equals the format dequantizer bit for bit", "[quant]") {
  for (WeightType t : kQuantTypes) {
    INFO(WeightTypeName(t));
    const int64_t n = 4 * WeightBlockSize(t) * 8;
    const std::vector<uint8_t> data = RandomQuantRows(t, 1, n, 11 + static_cast<int>(t));
    const std::vector<float> want = Dequantize(t, data, n);
    std::vector<float> got(n), got_portable(n);
    DecodeRowF32(t, data.data(), got.data(), n);
    portable::DecodeRowF32(t, data.data(), got_portable.data(), n);
    CHECK(std::memcmp(got.data(), want.data(), n * 4) == 0);
    CHECK(std::memcmp(got_portable.data(), want.data(), n * 4) == 0);
    // Widening for prefill: F32 exact, BF16 the exact value rounded to nearest even.
    const WeightView w{t, data.data(), 8, n / 8};
    std::vector<float> f(n);
    std::vector<uint16_t> b(n);
    ConvertRowsF32(w, 2, 7, f.data());
    ConvertRowsBf16(w, 2, 7, b.data());
    const int64_t off = 2 * (n / 8), cnt = 5 * (n / 8);
    CHECK(std::memcmp(f.data(), want.data() + off, cnt * 4) == 0);
    int64_t bad = 0;
    for (int64_t k = 0; k < cnt; ++k) bad += b[k] != F32ToBF16(want[off + k]);
    CHECK(bad == 0);
  }
}

// Exact sums (double) and magnitudes of x [n, in] against the dequantized W [out, in].
testing::Expected Want(const std::vector<float>& x, const std::vector<float>& wf, int64_t in,
                       int64_t i, int64_t r) {
  testing::Expected e;
  for (int64_t k = 0; k < in; ++k) {
    const double p = static_cast<double>(x[i * in + k]) * wf[r * in + k];
    e.value += p;
    e.mag += std::fabs(p);
  }
  return e;
}

TEST_CASE("GemvQuantExact: every format, row ranges, row counts", "[quant]") {
  std::mt19937 rng(5);
  for (WeightType t : kQuantTypes) {
    INFO(WeightTypeName(t));
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t bs = WeightBlockSize(t);
      const int64_t in = bs * (1 + rng() % (bs == 32 ? 24 : 4));
      const int64_t out = 1 + rng() % 37;
      const int64_t n = 1 + rng() % 5;
      INFO("in " << in << " out " << out << " n " << n);
      const std::vector<uint8_t> data = RandomQuantRows(t, out, in, rng());
      const std::vector<float> wf = Dequantize(t, data, out * in);
      const std::vector<float> x = testing::Random(n * in, rng());
      const WeightView w{t, data.data(), out, in};
      const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
      testing::ExpectRowRange([&](float* y, int64_t ldy, int64_t a,
                                  int64_t b) { GemvQuantExact(w, x.data(), n, y, ldy, a, b); },
                              n, out + 3, r0, r1, 1e-6,
                              [&](int64_t i, int64_t r) { return Want(x, wf, in, i, r); });
    }
  }
}

TEST_CASE("Linear on block formats: gemv and oneDNN paths, f32 and bf16", "[quant]") {
  std::mt19937 rng(9);
  for (WeightType t : kQuantTypes) {
    INFO(WeightTypeName(t));
    const int64_t bs = WeightBlockSize(t);
    const int64_t in = bs == 32 ? 32 * (3 + rng() % 20) : 256 * (1 + rng() % 3);
    const int64_t out = 40 + rng() % 90;
    const std::vector<uint8_t> data = RandomQuantRows(t, out, in, rng());
    const std::vector<float> wf = Dequantize(t, data, out * in);
    for (LinearCompute c : {LinearCompute::kF32, LinearCompute::kBf16}) {
      LinearOptions o;
      o.compute = c;
      auto lin = Linear::Create(WeightView{t, data.data(), out, in}, o);
      REQUIRE(lin.ok());
      CHECK((*lin)->weights().data == data.data());  // read in place, never copied
      CHECK((*lin)->streamed_bytes() == data.size());
      for (int64_t n : {1, 2, 3, 4, 5, 9, 33}) {
        INFO("n " << n << " kernel " << (*lin)->KernelName(n));
        const std::vector<float> x = testing::Random(n * in, rng());
        std::vector<float> y(n * out);
        REQUIRE((*lin)->Forward(x.data(), n, y.data()).ok());
        // F32: float rounding only. BF16: activations and widened weights rounded to BF16
        // (2^-8 relative each) or, on the gemv path, activations quantized to 8 bits.
        const double tol = c == LinearCompute::kF32 ? 1e-5 : 2e-2;
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t r = 0; r < out; ++r) {
            const testing::Expected e = Want(x, wf, in, i, r);
            if (std::fabs(y[i * out + r] - e.value) > tol * e.mag + 1e-30 && bad++ < 3) {
              FAIL_CHECK("y[" << i << ", " << r << "] = " << y[i * out + r] << " want " << e.value
                              << " mag " << e.mag);
            }
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

}  // namespace quant_gemv_test
}  // namespace textgen::ops
