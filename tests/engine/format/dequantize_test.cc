// ToF32 of every ggml block format against llama.cpp's own dequantization
// ($TEXTGEN_REFERENCE/quant/quant-vectors.gguf: blocks written by llama-quantize, edge cases
// included, and the F32 values ggml's dequantize_row_* gives them).
#include "engine/format/dequantize.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "engine/format/gguf_file.h"
#include "engine/format/quant_blocks.h"
#include "tests/test_util.h"

namespace textgen {
namespace dequantize_test {

constexpr DType kFormats[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,   DType::kQ5_1,
                              DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,   DType::kQ4_K,
                              DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

TEST_CASE("every format dequantizes bit for bit as llama.cpp", "[dequantize][models]") {
  const std::string path = testing::ReferenceDir() + "/quant/quant-vectors.gguf";
  auto gguf = GgufFile::Open(path);
  INFO(gguf.status().ToString());
  REQUIRE(gguf.ok());
  for (DType type : kFormats) {
    for (const char* set : {"edge", "wide"}) {
      const std::string name = absl::AsciiStrToLower(std::string(DTypeName(type))) + "." + set;
      INFO(name);
      const GgufTensorInfo* q = (*gguf)->FindTensor(name);
      const GgufTensorInfo* ref = (*gguf)->FindTensor(name + ".dequant");
      REQUIRE(q != nullptr);
      REQUIRE(ref != nullptr);
      REQUIRE(q->type == type);
      REQUIRE(ref->type == DType::kF32);
      REQUIRE(q->num_elements == ref->num_elements);
      REQUIRE(q->num_bytes ==
              static_cast<size_t>(q->num_elements / BlockSize(type)) * BlockBytes(type));
      // Row by row, as the embedding lookup calls it.
      const int64_t cols = q->dims[0], rows = q->num_elements / cols;
      const size_t row_bytes = *RowBytes(type, cols);
      std::vector<float> got(static_cast<size_t>(cols));
      int64_t mismatches = 0;
      for (int64_t r = 0; r < rows; ++r) {
        ToF32(type, q->data + r * row_bytes, got.data(), cols);
        for (int64_t c = 0; c < cols; ++c) {
          uint32_t a, b;
          std::memcpy(&a, &got[c], 4);
          std::memcpy(&b, ref->data + 4 * (r * cols + c), 4);
          if (a != b && ++mismatches <= 3) {
            UNSCOPED_INFO("row " << r << " col " << c << ": got 0x" << std::hex << a << " want 0x"
                                 << b << std::dec);
          }
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("block sizes, bytes and ggml ids of every format", "[dequantize]") {
  struct Row {
    DType type;
    uint32_t ggml;
    int64_t block;
    size_t bytes;
  };
  const Row rows[] = {
      {DType::kQ4_0, 2, 32, 18},    {DType::kQ4_1, 3, 32, 20},    {DType::kQ5_0, 6, 32, 22},
      {DType::kQ5_1, 7, 32, 24},    {DType::kQ8_0, 8, 32, 34},    {DType::kQ2_K, 10, 256, 84},
      {DType::kQ3_K, 11, 256, 110}, {DType::kQ4_K, 12, 256, 144}, {DType::kQ5_K, 13, 256, 176},
      {DType::kQ6_K, 14, 256, 210}, {DType::kIQ4_NL, 20, 32, 18}, {DType::kIQ4_XS, 23, 256, 136},
      {DType::kMXFP4, 39, 32, 17}};
  for (const Row& r : rows) {
    INFO(DTypeName(r.type));
    CHECK(BlockSize(r.type) == r.block);
    CHECK(BlockBytes(r.type) == r.bytes);
    CHECK(GgmlTypeOf(r.type) == r.ggml);
    CHECK(*DTypeFromGgmlType(r.ggml) == r.type);
    CHECK(IsQuantized(r.type));
    CHECK(*RowBytes(r.type, 2 * r.block) == 2 * r.bytes);
    CHECK(absl::IsInvalidArgument(RowBytes(r.type, r.block + r.block / 2).status()));
  }
  CHECK(!IsQuantized(DType::kBf16));
  CHECK(absl::IsUnimplemented(DTypeFromGgmlType(16).status()));  // IQ2_XXS
  CHECK(absl::IsUnimplemented(DTypeFromGgmlType(15).status()));  // Q8_K: activations only
}

}  // namespace dequantize_test
}  // namespace textgen
