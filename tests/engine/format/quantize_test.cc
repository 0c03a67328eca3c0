#include "engine/format/quantize.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/format/gguf_file.h"
#include "tests/test_util.h"

namespace textgen {
namespace quantize_test {

struct Q8Block {
  uint16_t d;
  int8_t q[32];
};

using BlockFn = void (*)(const float*, uint8_t*);
struct Kernel {
  const char* name;
  BlockFn fn;
};
// The hand-computed cases hold for the fast path and for ggml's reference loop.
const Kernel kKernels[] = {{"fast", &QuantizeBlockQ8_0},
                           {"reference", &QuantizeBlockQ8_0Reference}};

Q8Block Quantize(const std::vector<float>& x, BlockFn fn) {
  REQUIRE(x.size() == 32);
  uint8_t bytes[kQ8_0BlockBytes];
  fn(x.data(), bytes);
  Q8Block b;
  std::memcpy(&b.d, bytes, 2);
  std::memcpy(b.q, bytes + 2, 32);
  return b;
}

TEST_CASE("Q8_0 of a zero block is a zero scale and zero quants", "[quantize]") {
  for (const Kernel& k : kKernels) {
    INFO(k.name);
    Q8Block b = Quantize(std::vector<float>(32, 0.0f), k.fn);
    CHECK(b.d == 0);
    for (int8_t q : b.q) CHECK(q == 0);
    // -0.0 has amax 0 too: id = 0 keeps every quant at 0.
    b = Quantize(std::vector<float>(32, -0.0f), k.fn);
    CHECK((b.d & 0x7fff) == 0);
    for (int8_t q : b.q) CHECK(q == 0);
  }
}

TEST_CASE("Q8_0 with amax 127 has scale 1 and rounds halves away from zero", "[quantize]") {
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 126.49f, 3.4999998f, 0.49f};
  const int8_t want[] = {127, -127, 1, -1, 2, 3, -3, 126, 3, 0};
  std::copy(std::begin(in), std::end(in), x.begin());
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    Q8Block b = Quantize(x, kernel.fn);
    CHECK(b.d == 0x3c00);  // F16 1.0
    for (size_t i = 0; i < std::size(want); ++i) {
      INFO("value " << in[i]);
      CHECK(b.q[i] == want[i]);
    }
    for (size_t i = std::size(want); i < 32; ++i) CHECK(b.q[i] == 0);
  }
}

TEST_CASE("Q8_0 scales by the F32 d, then stores d as F16", "[quantize]") {
  // amax 2.54 (from a negative value): d = 2.54f / 127 = 0.02f (F16 0x251f = 0.0200043),
  // id = 1 / d = 50 exactly. 0.01f * 50 rounds to 0.5f, so roundf gives 1; scaling by the F16
  // scale instead would give 0.4999 -> 0. 0.05f * 50 = 2.5 -> 3 (round-half-even would give 2).
  std::vector<float> x(32, 0.0f);
  const float in[] = {-2.54f, 0.01f, -0.01f, 0.05f, 1.0f, 0.1f, 0.0099f};
  const int8_t want[] = {-127, 1, -1, 3, 50, 5, 0};
  std::copy(std::begin(in), std::end(in), x.begin());
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    Q8Block b = Quantize(x, kernel.fn);
    CHECK(b.d == 0x251f);
    for (size_t i = 0; i < std::size(want); ++i) {
      INFO("value " << in[i]);
      CHECK(b.q[i] == want[i]);
    }
  }
}

TEST_CASE("Q8_0 fast path matches ggml's reference loop byte for byte", "[quantize]") {
  // Random blocks over many scales; half of them are multiples of half a step, so x / d hits
  // exact ties that round-half-even would round differently.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> half_steps(-254, 254);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 4000; ++trial) {
    float x[32];
    const float scale = std::ldexp(1.0f, trial % 40 - 30);
    for (float& v : x) v = trial % 2 ? half_steps(rng) * 0.5f * scale : normal(rng) * scale;
    if (trial % 2) x[trial % 32] = 127.0f * scale;  // d = scale exactly, so ties stay ties
    uint8_t fast[kQ8_0BlockBytes], ref[kQ8_0BlockBytes];
    QuantizeBlockQ8_0(x, fast);
    QuantizeBlockQ8_0Reference(x, ref);
    INFO("trial " << trial);
    CHECK(std::memcmp(fast, ref, kQ8_0BlockBytes) == 0);
  }
}

TEST_CASE("Q8_0 of TinyStories-656K-F32 is the published Q8_0 file, byte for byte", "[quantize]") {
  // The published file was quantized by llama.cpp from the same weights. Scaling by x / d
  // instead of x * (1 / d), as gguf-py's converter does, changes ~400 of its quants.
  auto f32 = GgufFile::Open(testing::ModelPath("TinyStories-656K-F32.gguf"));
  auto q8 = GgufFile::Open(testing::ModelPath("TinyStories-656K-Q8_0.gguf"));
  REQUIRE(f32.ok());
  REQUIRE(q8.ok());
  int quantized = 0;
  for (const GgufTensorInfo& t : (*q8)->tensors()) {
    if (t.type != DType::kQ8_0) continue;
    INFO("tensor " << t.name);
    const GgufTensorInfo* src = (*f32)->FindTensor(t.name);
    REQUIRE(src != nullptr);
    REQUIRE(src->num_elements == t.num_elements);
    std::vector<float> x(src->num_elements);
    ToF32(src->type, src->data, x.data(), src->num_elements);
    std::vector<uint8_t> bytes(t.num_bytes);
    REQUIRE(FromF32(DType::kQ8_0, x, absl::MakeSpan(bytes)).ok());
    CHECK(std::memcmp(bytes.data(), t.data, t.num_bytes) == 0);
    ++quantized;
  }
  CHECK(quantized == 15);
}

TEST_CASE("Q8_0 blocks of a row are scaled independently", "[quantize]") {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // block 0: d = 1
  x[1] = 1.0f;
  x[32] = 2.54f;  // block 1: d = 0.02
  x[33] = 1.0f;
  std::vector<uint8_t> bytes(2 * kQ8_0BlockBytes);
  REQUIRE(FromF32(DType::kQ8_0, x, absl::MakeSpan(bytes)).ok());
  uint16_t d0, d1;
  std::memcpy(&d0, bytes.data(), 2);
  std::memcpy(&d1, bytes.data() + kQ8_0BlockBytes, 2);
  CHECK(d0 == 0x3c00);
  CHECK(d1 == 0x251f);
  CHECK(static_cast<int8_t>(bytes[2 + 1]) == 1);
  CHECK(static_cast<int8_t>(bytes[kQ8_0BlockBytes + 2]) == 127);
  CHECK(static_cast<int8_t>(bytes[kQ8_0BlockBytes + 2 + 1]) == 50);
}

TEST_CASE("Q8_0 round trip stays within half a step plus the F16 scale's error", "[quantize]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    // Scales from 1e-3 to 1e3 so the F16 scale is exercised across its range.
    std::normal_distribution<float> dist(0.0f, std::pow(10.0f, static_cast<float>(seed % 7) - 3));
    std::vector<float> x(32 * 16);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> bytes(16 * kQ8_0BlockBytes);
    REQUIRE(FromF32(DType::kQ8_0, x, absl::MakeSpan(bytes)).ok());
    std::vector<float> y(x.size());
    ToF32(DType::kQ8_0, bytes.data(), y.data(), static_cast<int64_t>(y.size()));
    for (size_t b = 0; b < 16; ++b) {
      uint16_t dh;
      std::memcpy(&dh, bytes.data() + b * kQ8_0BlockBytes, 2);
      float amax = 0.0f;
      for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      const float d = amax / 127.0f;
      // The F16 scale is d rounded: relative error 2^-11, or 2^-25 absolute when d falls in
      // F16's subnormal range (below 2^-14, i.e. blocks with amax under ~0.0078).
      const float d_err = std::max(d * 0x1p-11f, 0x1p-25f);
      CHECK(std::fabs(F16ToF32(dh) - d) <= d_err);
      // Rounding to the nearest step costs d/2; the stored scale's error adds up to 127 * d_err
      // on the largest quants.
      const float bound = (d / 2 + 127 * d_err) * (1 + 1e-6f);
      for (size_t i = 0; i < 32; ++i) {
        INFO("seed " << seed << " index " << b * 32 + i);
        CHECK(std::fabs(x[b * 32 + i] - y[b * 32 + i]) <= bound);
      }
    }
  }
}

TEST_CASE("F16 and BF16 rows match the scalar converters", "[quantize]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> x;
  // Random bit patterns cover normals, subnormals, inf and NaN of both signs.
  for (int i = 0; i < 4096; ++i) x.push_back(std::bit_cast<float>(bits(rng)));
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e-8f, 0x1p-25f, 3.14159f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (DType type : {DType::kF16, DType::kBf16}) {
    std::vector<uint8_t> bytes(2 * x.size());
    REQUIRE(FromF32(type, x, absl::MakeSpan(bytes)).ok());
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      INFO(DTypeName(type) << " bits " << std::bit_cast<uint32_t>(x[i]));
      CHECK(h == (type == DType::kF16 ? F32ToF16(x[i]) : F32ToBF16(x[i])));
    }
  }
  std::vector<uint8_t> bytes(4 * x.size());
  REQUIRE(FromF32(DType::kF32, x, absl::MakeSpan(bytes)).ok());
  CHECK(std::memcmp(bytes.data(), x.data(), bytes.size()) == 0);
}

TEST_CASE("FromF32 rejects bad sizes", "[quantize]") {
  std::vector<float> x(33, 1.0f);
  std::vector<uint8_t> bytes(100, 0xab);
  absl::Status s = FromF32(DType::kQ8_0, x, absl::MakeSpan(bytes));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("33") && Catch::Contains("32"));
  for (uint8_t b : bytes) REQUIRE(b == 0xab);

  x.resize(32);
  s = FromF32(DType::kQ8_0, x, absl::MakeSpan(bytes));  // needs 34 bytes, has 100
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("100") && Catch::Contains("34"));
  s = FromF32(DType::kF16, x, absl::MakeSpan(bytes).subspan(0, 63));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(FromF32(DType::kF16, x, absl::MakeSpan(bytes).subspan(0, 64)).ok());
  CHECK(FromF32(DType::kQ8_0, {}, {}).ok());  // an empty row is zero blocks
}

}  // namespace quantize_test
}  // namespace textgen
