// Batch invariance of Linear's default path: a row's output bytes do not depend on how many
// other rows share the call, on the row's position among them, or on the thread count.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "engine/ops/linear.h"
#include "engine/ops/threading.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/quant_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace batch_invariance_test {

using testing::Random;

// Every weight type Linear reads.
std::vector<WeightType> AllTypes() {
  std::vector<WeightType> types = {WeightType::kF32, WeightType::kF16, WeightType::kBf16,
                                   WeightType::kQ8_0};
  for (WeightType t : testing::kQuantTypes) types.push_back(t);
  return types;
}

// Random bytes of w [out, in] stored as `type`.
std::vector<uint8_t> RandomWeights(WeightType type, int64_t out, int64_t in, uint32_t seed) {
  const std::vector<float> f = Random(static_cast<size_t>(out * in), seed, -0.1f, 0.1f);
  std::vector<uint8_t> bytes(WeightView{type, nullptr, out, in}.bytes());
  switch (type) {
    case WeightType::kF32:
      std::memcpy(bytes.data(), f.data(), bytes.size());
      break;
    case WeightType::kF16:
    case WeightType::kBf16:
      for (size_t i = 0; i < f.size(); ++i) {
        const uint16_t h = type == WeightType::kF16 ? F32ToF16(f[i]) : F32ToBF16(f[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
      break;
    case WeightType::kQ8_0: {
      const std::vector<BlockQ8_0> blocks = testing::RandomBlocks(out * in / 32, seed, 0.01f);
      std::memcpy(bytes.data(), blocks.data(), bytes.size());
      break;
    }
    default:
      bytes = testing::RandomQuantRows(type, out, in, seed);
      break;
  }
  return bytes;
}

// y [n, out] of one Forward over `n` rows of x starting at row `first` (x [*, in]).
std::vector<float> Run(const Linear& linear, const std::vector<float>& x, int64_t first,
                       int64_t n) {
  const int64_t in = linear.in_features();
  std::vector<float> y(static_cast<size_t>(n * linear.out_features()));
  REQUIRE(linear.Forward(x.data() + first * in, n, y.data()).ok());
  return y;
}

// Checks each row of batches of `batch` rows taken from x at offsets `starts` against the rows
// computed one at a time (`solo` [rows, out]), byte for byte.
void ExpectBatchesMatchSolo(const Linear& linear, const std::vector<float>& x,
                            const std::vector<float>& solo, int64_t batch,
                            const std::vector<int64_t>& starts) {
  const int64_t out = linear.out_features();
  for (int64_t start : starts) {
    const std::vector<float> y = Run(linear, x, start, batch);
    int64_t bad_rows = 0;
    for (int64_t i = 0; i < batch; ++i) {
      const float* want = solo.data() + (start + i) * out;
      if (std::memcmp(y.data() + i * out, want, out * sizeof(float)) != 0) ++bad_rows;
    }
    INFO("batch " << batch << " from row " << start << " (" << linear.KernelName(batch) << ")");
    CHECK(bad_rows == 0);
  }
}

void CheckInvariant(WeightType type, LinearCompute compute, int64_t out, int64_t in) {
  const std::vector<uint8_t> w = RandomWeights(type, out, in, 7);
  LinearOptions opts;
  opts.compute = compute;
  opts.parallel_min_bytes = 0;  // every call splits its output rows across the threads
  auto linear = Linear::Create(WeightView{type, w.data(), out, in}, opts);
  REQUIRE(linear.ok());
  constexpr int64_t kRows = 64 + 5;
  // Rows of very different magnitudes, so per-call scaling (or a shared quantization scale)
  // would show.
  std::vector<float> x = Random(static_cast<size_t>(kRows * in), 11);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t k = 0; k < in; ++k) x[i * in + k] *= static_cast<float>(1 + (i % 7) * 9);
  }
  const int saved = NumThreads();
  SetNumThreads(1);
  std::vector<float> solo(static_cast<size_t>(kRows * out));
  for (int64_t i = 0; i < kRows; ++i) {
    const std::vector<float> y = Run(**linear, x, i, 1);
    std::memcpy(solo.data() + i * out, y.data(), out * sizeof(float));
  }
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    INFO(threads << " threads");
    ExpectBatchesMatchSolo(**linear, x, solo, 1, {0, 33});
    ExpectBatchesMatchSolo(**linear, x, solo, 3, {0, 1, 2, 40});
    ExpectBatchesMatchSolo(**linear, x, solo, 16, {0, 3, 9, 53});
    ExpectBatchesMatchSolo(**linear, x, solo, 64, {0, 1, 2, 3, 5});
  }
  SetNumThreads(saved);
}

TEST_CASE("Linear default path is batch-invariant for every weight type and compute mode") {
  for (LinearCompute compute : {LinearCompute::kF32, LinearCompute::kBf16}) {
    for (WeightType type : AllTypes()) {
      DYNAMIC_SECTION(WeightTypeName(type) << (compute == LinearCompute::kF32 ? " f32" : " bf16")) {
        // out not a multiple of the 16-row split or the 8-row tiles: ragged tiles too.
        CheckInvariant(type, compute, 200, 512);
      }
    }
  }
}

TEST_CASE("Linear batch invariance holds for a wide layer (output rows in many blocks)") {
  CheckInvariant(WeightType::kBf16, LinearCompute::kBf16, 1000, 768);
  CheckInvariant(WeightType::kQ8_0, LinearCompute::kBf16, 1000, 768);
  CheckInvariant(WeightType::kQ4_K, LinearCompute::kBf16, 1000, 768);  // column-lane panels
}

}  // namespace batch_invariance_test
}  // namespace textgen::ops
