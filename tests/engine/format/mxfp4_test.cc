// MXFP4 against ggml's own quantizer and dequantizer, bit for bit.
//
// tests/data/quant/mxfp4-vectors.gguf holds 32 rows of 256 F32 values (`source`; one edge case
// per row, listed in its `mxfp4_vectors.rows` key: zeros, all-equal blocks, midpoints between
// codes and one ulp either side, saturation above 6x the scale, amax at and just below powers
// of two, values near the F32 maximum, scales whose E8M0 byte is 0, 1 or wraps below 2^-125,
// subnormal inputs, NaN, +-inf, -0.0, random distributions), the bytes ggml's
// ggml_quantize_chunk(GGML_TYPE_MXFP4) wrote for them (`mxfp4`) and the floats its to_float
// gives back (`dequant`). It was made by tests/data/quant/make_mxfp4_vectors.c linked against
// llama.cpp's libggml-base (the source tree of /work/llama-src: ggml 0.18.1, no git metadata,
// so the exact commit is not recorded; quantize_row_mxfp4_ref and dequantize_row_mxfp4 there
// are the ones read for engine/format). Rebuild: see the command at the top of that file;
// `./make_mxfp4_vectors mxfp4-vectors.gguf <commit>`.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/format/quant_blocks.h"
#include "engine/format/quantize.h"
#include "engine/format/quantize_rows.h"
#include "tests/test_util.h"

namespace textgen {
namespace mxfp4_test {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Vectors {
  std::unique_ptr<GgufFile> file;
  const GgufTensorInfo* source = nullptr;
  const GgufTensorInfo* mxfp4 = nullptr;
  const GgufTensorInfo* dequant = nullptr;
};

Vectors Open() {
  Vectors v;
  auto gguf = GgufFile::Open(testing::SourceDir() + "/tests/data/quant/mxfp4-vectors.gguf");
  INFO(gguf.status().ToString());
  REQUIRE(gguf.ok());
  v.file = std::move(gguf).value();
  v.source = v.file->FindTensor("source");
  v.mxfp4 = v.file->FindTensor("mxfp4");
  v.dequant = v.file->FindTensor("dequant");
  REQUIRE(v.source != nullptr);
  REQUIRE(v.mxfp4 != nullptr);
  REQUIRE(v.dequant != nullptr);
  REQUIRE(v.source->type == DType::kF32);
  REQUIRE(v.mxfp4->type == DType::kMXFP4);
  REQUIRE(v.dequant->type == DType::kF32);
  REQUIRE(v.source->dims == std::vector<int64_t>{256, 32});
  REQUIRE(v.mxfp4->num_bytes == size_t{32} * 8 * 17);
  return v;
}

TEST_CASE("MXFP4: FromF32 writes ggml's bytes for every test row", "[mxfp4][quantize]") {
  const Vectors v = Open();
  const int64_t cols = 256, rows = 32;
  const float* src = reinterpret_cast<const float*>(v.source->data);
  std::vector<uint8_t> got(*RowBytes(DType::kMXFP4, cols));
  for (int64_t r = 0; r < rows; ++r) {
    INFO("row " << r);
    REQUIRE(FromF32(DType::kMXFP4, absl::MakeConstSpan(src + r * cols, cols), absl::MakeSpan(got))
                .ok());
    const uint8_t* want = v.mxfp4->data + r * got.size();
    for (size_t b = 0; b < got.size() / 17; ++b) {
      INFO("block " << b << " e " << int{got[b * 17]} << " want " << int{want[b * 17]});
      CHECK(std::memcmp(got.data() + b * 17, want + b * 17, 17) == 0);
    }
  }
  // The whole tensor in one call gives the same bytes (blocks are independent).
  std::vector<uint8_t> all(v.mxfp4->num_bytes);
  REQUIRE(FromF32(DType::kMXFP4, absl::MakeConstSpan(src, cols * rows), absl::MakeSpan(all)).ok());
  CHECK(std::memcmp(all.data(), v.mxfp4->data, all.size()) == 0);
}

TEST_CASE("MXFP4: ToF32 gives ggml's floats bit for bit", "[mxfp4][dequantize]") {
  const Vectors v = Open();
  const int64_t cols = 256, rows = 32;
  const size_t row_bytes = *RowBytes(DType::kMXFP4, cols);
  std::vector<float> got(cols);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ToF32(DType::kMXFP4, v.mxfp4->data + r * row_bytes, got.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      float want;
      std::memcpy(&want, v.dequant->data + 4 * (r * cols + c), 4);
      if (Bits(got[c]) != Bits(want) && ++mismatches <= 5) {
        UNSCOPED_INFO("row " << r << " col " << c << ": got " << got[c] << " want " << want);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("MXFP4: the E8M0 half-scale and the code table", "[mxfp4]") {
  // 2^(e - 128): subnormal for e = 0 and 1, normal from e = 2.
  CHECK(Mxfp4HalfScale(0) == std::ldexp(1.0f, -128));
  CHECK(Mxfp4HalfScale(1) == std::ldexp(1.0f, -127));
  CHECK(Mxfp4HalfScale(2) == std::ldexp(1.0f, -126));
  CHECK(Mxfp4HalfScale(127) == 0.5f);
  CHECK(Mxfp4HalfScale(128) == 1.0f);
  CHECK(Mxfp4HalfScale(255) == std::ldexp(1.0f, 127));
  // A block with e = 127 (scale 1) holding every code: the E2M1 values.
  BlockMXFP4 b{};
  b.e = 127;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[32];
  ToF32(DType::kMXFP4, &b, y, 32);
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    CHECK(y[j] == e2m1[j]);
    CHECK(y[j + 16] == e2m1[15 - j]);
  }
  CHECK(Bits(y[8]) == 0);  // code 8 (-0 in E2M1) is +0, as ggml's table has it
}

TEST_CASE("MXFP4: type id, name, sizes and bad lengths", "[mxfp4]") {
  CHECK(*DTypeFromGgmlType(39) == DType::kMXFP4);
  CHECK(GgmlTypeOf(DType::kMXFP4) == 39);
  CHECK(DTypeName(DType::kMXFP4) == "MXFP4");
  CHECK(BlockSize(DType::kMXFP4) == 32);
  CHECK(BlockBytes(DType::kMXFP4) == 17);
  CHECK(IsQuantized(DType::kMXFP4));
  CHECK(*RowBytes(DType::kMXFP4, 2880) == 90 * 17);
  CHECK(RowBytes(DType::kMXFP4, 48).status().code() == absl::StatusCode::kInvalidArgument);
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(33);
  CHECK(FromF32(DType::kMXFP4, x, absl::MakeSpan(out)).code() ==
        absl::StatusCode::kInvalidArgument);
  std::vector<float> odd(40, 1.0f);
  std::vector<uint8_t> out2(40);
  CHECK(FromF32(DType::kMXFP4, odd, absl::MakeSpan(out2)).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("MXFP4: quantizing dequantized blocks gives the same blocks", "[mxfp4][quantize]") {
  // Every code with an exponent whose largest code is 6 (amax/scale in [4, 8)): decoding then
  // encoding is the identity on the codes, unless a block lacks a value >= 4x its scale.
  std::vector<uint8_t> blocks;
  for (int e = 10; e < 250; e += 7) {
    BlockMXFP4 b{};
    b.e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j % 8) | ((15 - j) % 16) << 4);
    b.qs[0] = 0x07;  // 6 x scale: the block's amax
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&b);
    blocks.insert(blocks.end(), p, p + 17);
  }
  const int64_t n = static_cast<int64_t>(blocks.size() / 17) * 32;
  std::vector<float> x(n);
  ToF32(DType::kMXFP4, blocks.data(), x.data(), n);
  std::vector<uint8_t> again(blocks.size());
  REQUIRE(FromF32(DType::kMXFP4, x, absl::MakeSpan(again)).ok());
  // Code 8 (-0) comes back as code 0: ggml's encoder prefers the first of equal errors.
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 17 == 0) {
      CHECK(again[i] == blocks[i]);
      continue;
    }
    auto fix = [](uint8_t c) { return static_cast<uint8_t>(c == 8 ? 0 : c); };
    CHECK(fix(again[i] & 0xF) == fix(blocks[i] & 0xF));
    CHECK(fix(again[i] >> 4) == fix(blocks[i] >> 4));
  }
}

}  // namespace mxfp4_test
}  // namespace textgen
