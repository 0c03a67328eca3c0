// The block quantizers against llama.cpp's own output: ../reference/quant/quant-vectors.gguf
// holds two F32 sources (32 edge-case rows, 16 rows of 4 super-blocks over six decades of
// scale) and the blocks llama-quantize (no imatrix) made of them for every format.
#include "engine/format/quantize_rows.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/format/quantize.h"
#include "tests/test_util.h"

namespace textgen {
namespace quantize_rows_test {

const DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,   DType::kQ5_1,
                        DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,
                        DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

// Values a block: 32, or 256 for the super-block formats (which refuse a row of 32).
int64_t BlockValues(DType t) { return RowBytes(t, 32).ok() ? 32 : 256; }

double Rms(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  return std::sqrt(s / static_cast<double>(n));
}

std::string VectorsPath() { return testing::ModelPath("../reference/quant/quant-vectors.gguf"); }

TEST_CASE("quantizers reproduce llama-quantize's blocks of quant-vectors.gguf", "[quantize]") {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(VectorsPath());
  REQUIRE(file.ok());
  for (DType type : kTypes) {
    const std::string lower = absl::AsciiStrToLower(std::string(DTypeName(type)));
    for (const char* part : {"edge", "wide"}) {
      INFO(lower << "." << part);
      const GgufTensorInfo* src = (*file)->FindTensor(std::string("source.") + part);
      const GgufTensorInfo* ref = (*file)->FindTensor(lower + "." + part);
      REQUIRE(src != nullptr);
      REQUIRE(ref != nullptr);
      REQUIRE(ref->type == type);
      const int64_t cols = src->dims[0], rows = src->dims[1];
      const size_t row_bytes = *RowBytes(type, cols);
      const size_t block_bytes = *RowBytes(type, BlockValues(type));
      const float* x = reinterpret_cast<const float*>(src->data);
      std::vector<uint8_t> ours(row_bytes);
      int64_t identical = 0, total = 0;
      for (int64_t r = 0; r < rows; ++r) {
        REQUIRE(FromF32(type, absl::MakeConstSpan(x + r * cols, cols), absl::MakeSpan(ours)).ok());
        const uint8_t* theirs = ref->data + r * row_bytes;
        bool row_same = true;
        for (size_t b = 0; b < row_bytes / block_bytes; ++b, ++total) {
          const bool same = std::memcmp(ours.data() + b * block_bytes, theirs + b * block_bytes,
                                        block_bytes) == 0;
          identical += same;
          row_same &= same;
        }
        if (!row_same) {
          // Not the same rounding: the row must still fit the source as well as llama.cpp's.
          std::vector<float> mine(cols), llama(cols);
          ToF32(type, ours.data(), mine.data(), cols);
          ToF32(type, theirs, llama.data(), cols);
          const double e_ours = Rms(mine.data(), x + r * cols, cols);
          const double e_llama = Rms(llama.data(), x + r * cols, cols);
          INFO("row " << r << ": RMS error " << e_ours << " vs llama.cpp's " << e_llama);
          CHECK(e_ours <= 1.02 * e_llama + 1e-30);
        }
      }
      // Every block of these vectors is byte-identical today (see quantize_rows.h on why the
      // float operations must stay in ggml's order); a change that loses that shows here.
      WARN(lower << "." << part << ": " << identical << "/" << total
                 << " blocks byte-identical to llama.cpp's");
      CHECK(identical == total);
    }
  }
}

TEST_CASE("quantizer bytes do not depend on how rows are split", "[quantize]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const int64_t cols = 512, rows = 6;
  std::vector<float> x(cols * rows);
  for (float& v : x) v = normal(rng);
  for (DType type : kTypes) {
    INFO(DTypeName(type));
    const size_t row_bytes = *RowBytes(type, cols);
    std::vector<uint8_t> whole(row_bytes * rows), split(row_bytes * rows);
    REQUIRE(FromF32(type, x, absl::MakeSpan(whole)).ok());
    for (int64_t r = 0; r < rows; ++r) {
      REQUIRE(FromF32(type, absl::MakeConstSpan(x.data() + r * cols, cols),
                      absl::MakeSpan(split.data() + r * row_bytes, row_bytes))
                  .ok());
    }
    CHECK(whole == split);
  }
}

TEST_CASE("quantizers round-trip random rows within each format's resolution", "[quantize]") {
  // RMS error relative to the values' RMS, loose bounds per bit width: a broken packing (levels
  // in the wrong nibble, scales swapped) gives errors of the order of the values themselves.
  struct Bound {
    DType type;
    double max_relative_rms;
  };
  const Bound bounds[] = {{DType::kQ2_K, 0.45},   {DType::kQ3_K, 0.25}, {DType::kQ4_0, 0.15},
                          {DType::kQ4_1, 0.15},   {DType::kQ4_K, 0.12}, {DType::kIQ4_NL, 0.12},
                          {DType::kIQ4_XS, 0.12}, {DType::kQ5_0, 0.07}, {DType::kQ5_1, 0.07},
                          {DType::kQ5_K, 0.06},   {DType::kQ6_K, 0.03}, {DType::kQ8_0, 0.01},
                          {DType::kMXFP4, 0.25}};
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = normal(rng);
  const double rms = Rms(x.data(), std::vector<float>(n, 0.0f).data(), n);
  for (const Bound& b : bounds) {
    INFO(DTypeName(b.type));
    std::vector<uint8_t> q(*RowBytes(b.type, n));
    REQUIRE(FromF32(b.type, x, absl::MakeSpan(q)).ok());
    ToF32(b.type, q.data(), back.data(), n);
    const double rel = Rms(back.data(), x.data(), n) / rms;
    INFO("relative RMS error " << rel);
    CHECK(rel < b.max_relative_rms);
  }
}

TEST_CASE("FromF32 refuses rows that are not whole blocks", "[quantize]") {
  std::vector<float> x(288, 1.0f);
  std::vector<uint8_t> out(1024);
  CHECK(FromF32(DType::kQ4_K, x, absl::MakeSpan(out)).code() == absl::StatusCode::kInvalidArgument);
  CHECK(FromF32(DType::kIQ4_XS, x, absl::MakeSpan(out)).code() ==
        absl::StatusCode::kInvalidArgument);
  std::vector<float> y(48, 1.0f);
  CHECK(FromF32(DType::kQ4_0, y, absl::MakeSpan(out)).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("NearestInt and BestIndexInt8 behave as ggml's helpers", "[quantize]") {
  using quant_internal::BestIndexInt8;
  using quant_internal::NearestInt;
  CHECK(NearestInt(2.5f) == 2);  // ties to even, unlike roundf
  CHECK(NearestInt(3.5f) == 4);
  CHECK(NearestInt(-2.5f) == -2);
  CHECK(NearestInt(-0.4f) == 0);
  const int8_t v[4] = {-10, 0, 4, 20};
  CHECK(BestIndexInt8(4, v, -100.0f) == 0);
  CHECK(BestIndexInt8(4, v, 2.0f) == 2);  // the midpoint goes to the upper value
  CHECK(BestIndexInt8(4, v, 1.9f) == 1);
  CHECK(BestIndexInt8(4, v, 100.0f) == 3);
}

}  // namespace quantize_rows_test
}  // namespace textgen
