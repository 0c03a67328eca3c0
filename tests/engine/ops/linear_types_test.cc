// Linear on weights stored as F16, BF16 and Q8_0, in both compute modes and through both
// kernels, against a double-precision product with the weights those bytes encode.
#include <immintrin.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/ops/linear.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace linear_types_test {

using testing::Random;

// Encodes w [out, in] in `type`; `decoded` receives the values the bytes stand for.
std::vector<uint8_t> Encode(WeightType type, const std::vector<float>& w, int64_t out, int64_t in,
                            std::vector<float>* decoded) {
  decoded->resize(w.size());
  std::vector<uint8_t> bytes(WeightView{type, nullptr, out, in}.bytes());
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t k = 0; k < in; ++k) {
      const float v = w[r * in + k];
      float& dec = (*decoded)[r * in + k];
      if (type == WeightType::kF16) {
        const uint16_t h = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
        std::memcpy(&bytes[(r * in + k) * 2], &h, 2);
        dec = _cvtsh_ss(h);
      } else if (type == WeightType::kBf16) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        const uint16_t h = static_cast<uint16_t>(b >> 16);  // truncation is a valid encoding
        std::memcpy(&bytes[(r * in + k) * 2], &h, 2);
        const uint32_t back = uint32_t{h} << 16;
        std::memcpy(&dec, &back, 4);
      }
    }
    if (type == WeightType::kQ8_0) {
      for (int64_t b = 0; b < in / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[r * in + b * 32 + j]));
        const uint16_t dh = _cvtss_sh(amax / 127, _MM_FROUND_TO_NEAREST_INT);
        const float d = _cvtsh_ss(dh);
        uint8_t* blk = &bytes[r * (in / 32) * 34 + b * 34];
        std::memcpy(blk, &dh, 2);
        for (int j = 0; j < 32; ++j) {
          const int q = d == 0 ? 0 : static_cast<int>(std::lround(w[r * in + b * 32 + j] / d));
          const int8_t qc = static_cast<int8_t>(std::clamp(q, -127, 127));
          blk[2 + j] = static_cast<uint8_t>(qc);
          (*decoded)[r * in + b * 32 + j] = d * qc;
        }
      }
    }
  }
  return bytes;
}

double MaxRelError(const std::vector<float>& w, int64_t out, int64_t in,
                   const std::vector<float>& x, int64_t n, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < out; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double p = static_cast<double>(x[r * in + k]) * w[j * in + k];
        ref += p;
        mag += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(y[r * out + j] - ref) / (mag + 1e-30));
    }
  }
  return worst;
}

TEST_CASE("Linear reads F16, BF16 and Q8_0 weights in both compute modes and kernels") {
  struct Shape {
    int64_t out, in;
  };
  for (const Shape s : {Shape{17, 64}, Shape{100, 96}, Shape{300, 256}, Shape{1000, 2048}}) {
    const std::vector<float> w = Random(s.out * s.in, 5 + s.out);
    for (WeightType type : {WeightType::kF16, WeightType::kBf16, WeightType::kQ8_0}) {
      std::vector<float> decoded;
      const std::vector<uint8_t> bytes = Encode(type, w, s.out, s.in, &decoded);
      for (LinearCompute compute : {LinearCompute::kF32, LinearCompute::kBf16}) {
        for (LinearKernel kernel : {LinearKernel::kGemv, LinearKernel::kOneDnn}) {
          LinearOptions o;
          o.compute = compute;
          o.kernel = kernel;
          o.parallel_min_bytes = 0;  // exercise the threaded split on every size
          auto linear = Linear::Create(WeightView{type, bytes.data(), s.out, s.in}, o);
          REQUIRE(linear.ok());
          for (int64_t n : {1, 3, 4, 5, 37}) {
            INFO("type " << WeightTypeName(type) << " compute " << static_cast<int>(compute)
                         << " kernel " << (*linear)->KernelName(n) << " [" << s.out << ", " << s.in
                         << "] n=" << n);
            const std::vector<float> x = Random(n * s.in, 7 + n);
            std::vector<float> y(n * s.out, NAN);
            REQUIRE((*linear)->Forward(x.data(), n, y.data()).ok());
            // Exact mode multiplies the decoded weights in F32. BF16 mode rounds weights and
            // activations to BF16 (2^-8 relative each); Q8_0 VNNI rounds activations to 8 bits
            // (half a step of amax/127 per value).
            const double tol = compute == LinearCompute::kF32 ? 2e-6 * std::sqrt(s.in) : 2e-2;
            CHECK(MaxRelError(decoded, s.out, s.in, x, n, y) <= tol);
          }
        }
      }
    }
  }
}

TEST_CASE("Linear kBf16 converts F32 and F16 weights to BF16 once, Q8_0 stays") {
  const std::vector<float> w = Random(64 * 64, 3);
  LinearOptions o;
  o.compute = LinearCompute::kBf16;
  auto f32 = Linear::Create(w.data(), 64, 64, o);
  REQUIRE(f32.ok());
  CHECK((*f32)->weights().type == WeightType::kBf16);
  CHECK((*f32)->weights().bytes() == 64 * 64 * 2);
  CHECK((*f32)->weights().data != w.data());
  std::vector<float> decoded;
  const std::vector<uint8_t> q = Encode(WeightType::kQ8_0, w, 64, 64, &decoded);
  o.batch_invariant = false;  // many rows through oneDNN (or AMX) with widened tiles
  auto q8 = Linear::Create(WeightView{WeightType::kQ8_0, q.data(), 64, 64}, o);
  REQUIRE(q8.ok());
  CHECK((*q8)->weights().type == WeightType::kQ8_0);
  CHECK((*q8)->weights().data == q.data());  // streamed in place, 34 bytes per 32 weights
  CHECK((*q8)->KernelName(1) == "gemv:q8_0:q8_0");
  CHECK((*q8)->KernelName(64).find("widen-q8_0") != std::string::npos);
}

}  // namespace linear_types_test
}  // namespace textgen::ops
