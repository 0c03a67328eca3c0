#include "engine/ops/q8_0_gemv.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "engine/format/dtype.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace q8_0_gemv_test {

using testing::Expected;
using testing::ExpectRowRange;
using testing::Random;
using testing::RandomBlocks;
using testing::RowRangeCall;

// sum_k x[k] * W[r, k] in double, W dequantized as dtype.h's F16ToF32(d) * q.
Expected ExactRef(const std::vector<BlockQ8_0>& w, int64_t in, const float* x, int64_t r) {
  const int64_t nb = in / 32;
  Expected e;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& blk = w[r * nb + b];
    const double d = F16ToF32(blk.d);
    for (int k = 0; k < 32; ++k) {
      const double p = static_cast<double>(x[b * 32 + k]) * (d * blk.qs[k]);
      e.value += p;
      e.mag += std::fabs(p);
    }
  }
  return e;
}

// llama.cpp's Q8_0 x Q8_0 dot product: sum_b d_w * d_x * (integer sum of q_w * q_x). The
// magnitude is sum |d_w d_x q_w q_x| over every product, not over whole blocks (a bound that
// also holds for kernels that scale partial sums of a block, as llama.cpp's AVX2 code does).
Expected VnniRef(const std::vector<BlockQ8_0>& w, int64_t in, const BlockQ8_0* xq, int64_t r) {
  const int64_t nb = in / 32;
  Expected e;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0& wb = w[r * nb + b];
    int64_t isum = 0, iabs = 0;
    for (int k = 0; k < 32; ++k) {
      isum += int64_t{wb.qs[k]} * xq[b].qs[k];
      iabs += std::abs(int64_t{wb.qs[k]} * xq[b].qs[k]);
    }
    const double scale = static_cast<double>(F16ToF32(wb.d)) * F16ToF32(xq[b].d);
    e.value += scale * isum;
    e.mag += std::fabs(scale) * iabs;
  }
  return e;
}

struct Shape {
  int64_t out, in;
};
constexpr Shape kShapes[] = {{1, 32}, {7, 64}, {37, 96}, {13, 800}, {9, 4096}, {21, 352}};

using ExactFn = void (*)(const WeightView&, const float*, int64_t, float*, int64_t, int64_t,
                         int64_t);
using VnniFn = void (*)(const WeightView&, const BlockQ8_0*, int64_t, float*, int64_t, int64_t,
                        int64_t);

// Row ranges to try on `out` rows: all of them, and an inner sub-range when there is one.
std::vector<std::pair<int64_t, int64_t>> Ranges(int64_t out) {
  std::vector<std::pair<int64_t, int64_t>> r = {{0, out}};
  if (out >= 3) r.push_back({out / 3, out - 1});
  return r;
}

void CheckExact(ExactFn fn) {
  for (const Shape& s : kShapes) {
    const std::vector<BlockQ8_0> w = RandomBlocks(s.out * s.in / 32, 1 + s.out + s.in, 0.05f);
    const WeightView view{WeightType::kQ8_0, w.data(), s.out, s.in};
    for (int64_t n = 1; n <= 9; ++n) {
      const std::vector<float> x = Random(n * s.in, 100 + n);
      for (auto [r0, r1] : Ranges(s.out)) {
        INFO("shape [" << s.out << ", " << s.in << "] n=" << n << " rows [" << r0 << ", " << r1
                       << ")");
        const RowRangeCall call = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
          fn(view, x.data(), n, y, ldy, a, b);
        };
        ExpectRowRange(call, n, s.out + 3, r0, r1, 1e-5, [&](int64_t i, int64_t r) {
          return ExactRef(w, s.in, x.data() + i * s.in, r);
        });
      }
    }
  }
}

void CheckVnni(VnniFn fn) {
  for (const Shape& s : kShapes) {
    const std::vector<BlockQ8_0> w = RandomBlocks(s.out * s.in / 32, 2 + s.out + s.in, 0.05f);
    const WeightView view{WeightType::kQ8_0, w.data(), s.out, s.in};
    for (int64_t n = 1; n <= 9; ++n) {
      const std::vector<BlockQ8_0> xq = RandomBlocks(n * s.in / 32, 200 + n, 0.1f);
      for (auto [r0, r1] : Ranges(s.out)) {
        INFO("shape [" << s.out << ", " << s.in << "] n=" << n << " rows [" << r0 << ", " << r1
                       << ")");
        const RowRangeCall call = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
          fn(view, xq.data(), n, y, ldy, a, b);
        };
        ExpectRowRange(call, n, s.out + 3, r0, r1, 1e-6, [&](int64_t i, int64_t r) {
          return VnniRef(w, s.in, xq.data() + i * (s.in / 32), r);
        });
      }
    }
  }
}

TEST_CASE("GemvQ8_0Exact matches a double reference of the dequantized weights") {
  CheckExact(&GemvQ8_0Exact);
}

TEST_CASE("portable GemvQ8_0Exact matches a double reference of the dequantized weights") {
  CheckExact(&portable::GemvQ8_0Exact);
}

TEST_CASE("GemvQ8_0Vnni matches llama.cpp's Q8_0 x Q8_0 formula") { CheckVnni(&GemvQ8_0Vnni); }

TEST_CASE("portable GemvQ8_0Vnni matches llama.cpp's Q8_0 x Q8_0 formula") {
  CheckVnni(&portable::GemvQ8_0Vnni);
}

TEST_CASE("GemvQ8_0Vnni integer sums are exact at the int8 extremes") {
  // Every product at its largest magnitude: q_w, q_x in {-128, 127}, scales 1, in = 4096.
  const int64_t out = 5, in = 4096, nb = in / 32;
  std::vector<BlockQ8_0> w(out * nb), xq(nb);
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      w[r * nb + b].d = F32ToF16(1.0f);
      for (int k = 0; k < 32; ++k) w[r * nb + b].qs[k] = (r + k) % 2 ? 127 : -128;
    }
  }
  for (int64_t b = 0; b < nb; ++b) {
    xq[b].d = F32ToF16(1.0f);
    for (int k = 0; k < 32; ++k) xq[b].qs[k] = k % 3 ? -128 : 127;
  }
  const WeightView view{WeightType::kQ8_0, w.data(), out, in};
  std::vector<float> y(out);
  GemvQ8_0Vnni(view, xq.data(), 1, y.data(), out, 0, out);
  for (int64_t r = 0; r < out; ++r) {
    // Sums of at most 2^21 in magnitude: exact in float whatever the order.
    CHECK(y[r] == VnniRef(w, in, xq.data(), r).value);
  }
}

// A row's result must not depend on the row range or the number of x rows of the call, so
// that splitting `out` across threads (or batching rows) gives bit-identical outputs.
TEST_CASE("Q8_0 kernels give bit-identical rows however the call is split") {
  const int64_t out = 37, in = 352, n = 6;
  const std::vector<BlockQ8_0> w = RandomBlocks(out * in / 32, 5, 0.05f);
  const WeightView view{WeightType::kQ8_0, w.data(), out, in};
  const std::vector<float> x = Random(n * in, 6);
  std::vector<BlockQ8_0> xq(n * in / 32);
  QuantizeActivationsQ8_0(x.data(), n, in, xq.data());
  const RowRangeCall exact = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
    GemvQ8_0Exact(view, x.data(), n, y, ldy, a, b);
  };
  const RowRangeCall vnni = [&](float* y, int64_t ldy, int64_t a, int64_t b) {
    GemvQ8_0Vnni(view, xq.data(), n, y, ldy, a, b);
  };
  for (const RowRangeCall& call : {exact, vnni}) {
    const std::vector<float> all = testing::RunAll(call, n, out);
    CHECK(testing::RunSplit(call, n, out, {1, 6, 7, 19, 30}) == all);
    CHECK(testing::RunSplit(call, n, out, {18}) == all);
  }
  // One x row at a time.
  std::vector<float> all(n * out), one(n * out);
  GemvQ8_0Exact(view, x.data(), n, all.data(), out, 0, out);
  for (int64_t i = 0; i < n; ++i) {
    GemvQ8_0Exact(view, x.data() + i * in, 1, one.data() + i * out, out, 0, out);
  }
  CHECK(one == all);
  GemvQ8_0Vnni(view, xq.data(), n, all.data(), out, 0, out);
  for (int64_t i = 0; i < n; ++i) {
    GemvQ8_0Vnni(view, xq.data() + i * (in / 32), 1, one.data() + i * out, out, 0, out);
  }
  CHECK(one == all);
}

// Linear's path: the activations packed once per call (at the VNNI level; elsewhere nothing is
// packed and the unpacked kernel runs), then any chunk of activation rows and row range; the
// reused pack holds stale bytes from a larger earlier call (odd and even block counts).
TEST_CASE("GemvQ8_0VnniPacked: one packing per call gives every row range's bytes") {
  std::mt19937 rng(41);
  PackedActivations packed;
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t in = 32 * (1 + rng() % 20), out = 1 + rng() % 45, n = 1 + rng() % 12;
    const int64_t nb = in / 32;
    INFO("in " << in << " out " << out << " n " << n);
    const std::vector<BlockQ8_0> w = RandomBlocks(out * nb, rng(), 0.05f);
    const std::vector<BlockQ8_0> xq = RandomBlocks(n * nb, rng(), 0.1f);
    const WeightView view{WeightType::kQ8_0, w.data(), out, in};
    const bool is_packed = PackQ8_0Vnni(xq.data(), n, nb, &packed);
    const int64_t i0 = rng() % n, m = 1 + rng() % (n - i0);
    const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
    std::vector<float> want(m * out, -1.0f), got(m * out, -1.0f);
    GemvQ8_0Vnni(view, xq.data() + i0 * nb, m, want.data(), out, r0, r1);
    GemvQ8_0VnniPacked(view, xq.data(), is_packed ? &packed : nullptr, i0, m, got.data(), out, r0,
                       r1);
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  }
}

// The choice of kernel level changes speed, never answers: this level's kernel (whatever
// TEXTGEN_MAX_ISA runs: column lanes at the VNNI levels, 8-row ymm panels at avx2 and avx512)
// gives the portable kernel's bytes, which state the one order, for every row count, row
// range and packing, on weights at the int8 extremes as well as random ones.
TEST_CASE("GemvQ8_0Vnni gives the portable kernel's bytes at this level") {
  std::mt19937 rng(57);
  PackedActivations packed;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t in = 32 * (1 + rng() % 70), out = 1 + rng() % 50, n = 1 + rng() % 9;
    const int64_t nb = in / 32;
    INFO("trial " << trial << " in " << in << " out " << out << " n " << n);
    std::vector<BlockQ8_0> w = RandomBlocks(out * nb, rng(), 0.05f);
    std::vector<BlockQ8_0> xq = RandomBlocks(n * nb, rng(), 0.1f);
    if (trial % 4 == 3) {  // every product at the extremes, -128 on both sides
      for (BlockQ8_0& b : w) {
        for (int k = 0; k < 32; ++k) b.qs[k] = (rng() & 1) ? 127 : -128;
      }
      for (BlockQ8_0& b : xq) {
        for (int k = 0; k < 32; ++k) b.qs[k] = (rng() & 1) ? 127 : -128;
      }
    }
    const WeightView view{WeightType::kQ8_0, w.data(), out, in};
    const int64_t r0 = rng() % out, r1 = r0 + 1 + rng() % (out - r0);
    std::vector<float> want(n * out, -1.0f), got(n * out, -1.0f), got_packed(n * out, -1.0f);
    portable::GemvQ8_0Vnni(view, xq.data(), n, want.data(), out, r0, r1);
    GemvQ8_0Vnni(view, xq.data(), n, got.data(), out, r0, r1);
    const bool is_packed = PackQ8_0Vnni(xq.data(), n, nb, &packed);
    GemvQ8_0VnniPacked(view, xq.data(), is_packed ? &packed : nullptr, 0, n, got_packed.data(), out,
                       r0, r1);
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(want.data(), got_packed.data(), want.size() * sizeof(float)) == 0);
  }
}

// ggml's quantize_row_q8_0_ref, written from its definition.
BlockQ8_0 GgmlQuantize(const float* v) {
  float amax = 0.0f;
  for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(v[k]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 out;
  out.d = F32ToF16(d);
  for (int k = 0; k < 32; ++k) out.qs[k] = static_cast<int8_t>(std::roundf(v[k] * id));
  return out;
}

// Blocks that probe the edges: random magnitudes from 1e-30 to 1e4, all zeros, halfway
// cases of roundf, values just below one half, and a negative amax.
std::vector<float> QuantizeInputs(int64_t n, int64_t in, uint32_t seed) {
  std::vector<float> x = Random(n * in, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exp10(-30.0f, 4.0f);
  for (int64_t b = 0; b < n * in / 32; ++b) {
    float* v = x.data() + b * 32;
    const float scale = std::pow(10.0f, exp10(rng));
    for (int k = 0; k < 32; ++k) v[k] *= scale;
    switch (b % 5) {
      case 1:
        std::fill(v, v + 32, 0.0f);
        break;
      case 2: {
        // amax 127 gives d = 1 and id = 1, so x * id is x itself.
        const float edge[] = {127.0f,  0.5f,  1.5f, 2.5f,  -0.5f,        -2.5f,      0.49999997f,
                              -126.5f, -1.5f, 3.5f, 64.5f, -0.49999997f, 2.4999998f, 100.5f};
        std::copy(std::begin(edge), std::end(edge), v);
        break;
      }
      case 3:
        std::fill(v, v + 32, -3.25f);
        v[7] = -7.0f;
        break;
      default:
        break;
    }
  }
  return x;
}

void CheckQuantize(void (*fn)(const float*, int64_t, int64_t, BlockQ8_0*)) {
  for (int64_t n : {1, 3, 4}) {
    for (int64_t in : {32, 64, 352, 4096}) {
      const std::vector<float> x = QuantizeInputs(n, in, static_cast<uint32_t>(n * 1000 + in));
      std::vector<BlockQ8_0> got(n * in / 32);
      fn(x.data(), n, in, got.data());
      int64_t bad = 0;
      for (int64_t b = 0; b < n * in / 32; ++b) {
        const BlockQ8_0 want = GgmlQuantize(x.data() + b * 32);
        const bool same =
            got[b].d == want.d && std::equal(std::begin(want.qs), std::end(want.qs), got[b].qs);
        if (!same && bad++ < 3) {
          FAIL_CHECK("n=" << n << " in=" << in << " block " << b << ": d " << got[b].d << " want "
                          << want.d);
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("QuantizeActivationsQ8_0 is ggml's quantize_row_q8_0 bit for bit") {
  CheckQuantize(&QuantizeActivationsQ8_0);
}

TEST_CASE("portable QuantizeActivationsQ8_0 is ggml's quantize_row_q8_0 bit for bit") {
  CheckQuantize(&portable::QuantizeActivationsQ8_0);
}

TEST_CASE("QuantizeActivationsQ8_0 rounds halfway cases away from zero") {
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.49999997f, -126.5f};
  const int8_t want[] = {127, 1, 2, 3, -1, -3, 0, -127};
  std::copy(std::begin(in), std::end(in), x.begin());
  BlockQ8_0 q;
  QuantizeActivationsQ8_0(x.data(), 1, 32, &q);
  CHECK(F16ToF32(q.d) == 1.0f);
  for (int k = 0; k < 8; ++k) {
    INFO("x = " << in[k]);
    CHECK(q.qs[k] == want[k]);
  }
}

}  // namespace q8_0_gemv_test
}  // namespace textgen::ops
