// SafetensorsFile on small hand-made files, valid and malformed.
#include "engine/format/safetensors_file.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace textgen {
namespace safetensors_file_test {

using ::textgen::testing::ScratchDir;
using ::textgen::testing::WriteFile;

std::string Make(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

struct Opened {
  std::string path;
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file;
};

Opened OpenBytes(const std::string& bytes) {
  const std::string path = ScratchDir() + "/model.safetensors";
  WriteFile(path, bytes);
  return {path, SafetensorsFile::Open(path)};
}

void ExpectError(const std::string& bytes, absl::StatusCode code, const std::string& needle) {
  Opened o = OpenBytes(bytes);
  REQUIRE(!o.file.ok());
  INFO(o.file.status().ToString());
  CHECK(o.file.status().code() == code);
  CHECK_THAT(std::string(o.file.status().message()),
             Catch::Contains(needle) && Catch::Contains(o.path));
}

// 3 tensors in 24 + 6 + 8 = 38 bytes, listed out of data order, plus a scalar.
const char kHeader[] = R"({"b": {"dtype": "F16", "shape": [3], "data_offsets": [24, 30]},)"
                       R"( "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
                       R"( "c": {"dtype": "BF16", "shape": [2, 1, 2], "data_offsets": [30, 38]},)"
                       R"( "s": {"dtype": "F32", "shape": [], "data_offsets": [38, 42]},)"
                       R"( "__metadata__": {"format": "pt", "n": 3}})";

std::string Data() {
  std::string d(42, '\0');
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<char>(i);
  return d;
}

TEST_CASE("safetensors valid file", "[safetensors]") {
  Opened o = OpenBytes(Make(kHeader, Data()));
  INFO(o.file.status().ToString());
  REQUIRE(o.file.ok());
  const SafetensorsFile& f = **o.file;
  CHECK(f.path() == o.path);
  REQUIRE(f.tensors().size() == 4);
  CHECK(f.tensors()[0].name == "a");
  CHECK(f.tensors()[1].name == "b");
  CHECK(f.tensors()[2].name == "c");
  CHECK(f.tensors()[3].name == "s");
  const SafetensorsTensor* a = f.FindTensor("a");
  REQUIRE(a != nullptr);
  CHECK(a->type == DType::kF32);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->num_elements == 6);
  CHECK(a->num_bytes == 24);
  CHECK(a->data[0] == 0);
  const SafetensorsTensor* b = f.FindTensor("b");
  REQUIRE(b != nullptr);
  CHECK(b->type == DType::kF16);
  CHECK(b->data - a->data == 24);
  CHECK(b->data[0] == 24);
  const SafetensorsTensor* c = f.FindTensor("c");
  REQUIRE(c != nullptr);
  CHECK(c->type == DType::kBf16);
  CHECK(c->shape == std::vector<int64_t>{2, 1, 2});
  const SafetensorsTensor* s = f.FindTensor("s");
  REQUIRE(s != nullptr);
  CHECK(s->shape.empty());
  CHECK(s->num_elements == 1);
  CHECK(f.FindTensor("__metadata__") == nullptr);
  CHECK(f.FindTensor("zzz") == nullptr);
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("n") == "3");
}

TEST_CASE("safetensors header errors", "[safetensors]") {
  SECTION("shorter than the length field") {
    ExpectError("abc", absl::StatusCode::kInvalidArgument, "truncated");
  }
  SECTION("header length beyond the file") {
    std::string b = Make(kHeader, Data());
    const uint64_t huge = uint64_t{1} << 62;
    std::memcpy(b.data(), &huge, 8);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "header length 4611686018427387904");
  }
  SECTION("bad JSON") {
    ExpectError(Make(R"({"a": {"dtype": )", ""), absl::StatusCode::kInvalidArgument,
                "not valid JSON");
  }
  SECTION("JSON that is not an object") {
    ExpectError(Make("[1, 2]", ""), absl::StatusCode::kInvalidArgument, "not an object");
  }
  SECTION("entry not an object") {
    ExpectError(Make(R"({"a": 5})", ""), absl::StatusCode::kInvalidArgument, "tensor 'a'");
  }
  SECTION("missing dtype") {
    ExpectError(Make(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", std::string(4, '\0')),
                absl::StatusCode::kInvalidArgument, "dtype");
  }
  SECTION("bad shape") {
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "xxxx"),
                absl::StatusCode::kInvalidArgument, "shape");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "xxxx"),
                absl::StatusCode::kInvalidArgument, "shape");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", "xxxx"),
                absl::StatusCode::kInvalidArgument, "shape");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],)"
                     R"( "data_offsets": [0, 4]}})",
                     "xxxx"),
                absl::StatusCode::kInvalidArgument, "overflows");
  }
  SECTION("bad data_offsets") {
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "xxxx"),
                absl::StatusCode::kInvalidArgument, "data_offsets");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", "xxxx"),
                absl::StatusCode::kInvalidArgument, "data_offsets");
  }
  SECTION("offsets out of bounds") {
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                     std::string(8, '\0')),
                absl::StatusCode::kInvalidArgument, "out of bounds");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})",
                     std::string(8, '\0')),
                absl::StatusCode::kInvalidArgument, "out of bounds");
    ExpectError(Make(R"({"a": {"dtype": "F32", "shape": [1],)"
                     R"( "data_offsets": [18446744073709551612, 18446744073709551615]}})",
                     std::string(8, '\0')),
                absl::StatusCode::kInvalidArgument, "out of bounds");
  }
  SECTION("size mismatch") {
    ExpectError(Make(R"({"a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 16]}})",
                     std::string(16, '\0')),
                absl::StatusCode::kInvalidArgument, "needs 8");
  }
  SECTION("unsupported and unknown dtypes") {
    ExpectError(Make(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
                     std::string(8, '\0')),
                absl::StatusCode::kUnimplemented, "tensor 'w': unsupported dtype I64");
    ExpectError(Make(R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})",
                     std::string(1, '\0')),
                absl::StatusCode::kInvalidArgument, "tensor 'w': unknown dtype \"Q4\"");
  }
  SECTION("metadata not an object") {
    ExpectError(Make(R"({"__metadata__": 1})", ""), absl::StatusCode::kInvalidArgument,
                "__metadata__");
  }
}

TEST_CASE("safetensors truncation and corruption never crash", "[safetensors]") {
  const std::string b = Make(kHeader, Data());
  const std::string dir = ScratchDir();
  int counter = 0;
  // A fresh name each time: truncating an existing file makes ext4 flush it, which is slow.
  auto fresh = [&dir, &counter](const std::string& bytes) {
    const std::string path = dir + "/t" + std::to_string(counter++) + ".safetensors";
    WriteFile(path, bytes);
    return path;
  };
  for (size_t n = 0; n < b.size(); ++n) {
    INFO("prefix " << n);
    const std::string path = fresh(b.substr(0, n));
    auto f = SafetensorsFile::Open(path);
    std::filesystem::remove(path);
    REQUIRE(!f.ok());
    REQUIRE(f.status().code() == absl::StatusCode::kInvalidArgument);
  }
  for (uint32_t seed = 0; seed < 1000; ++seed) {
    std::mt19937 rng(seed);
    std::string c = b;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 4); ++i) {
      c[rng() % c.size()] = static_cast<char>(rng());
    }
    const std::string path = fresh(c);
    auto f = SafetensorsFile::Open(path);
    std::filesystem::remove(path);  // the mapping stays valid
    if (!f.ok()) continue;
    // Touch every byte accepted as tensor data: ASan flags any that lie outside the mapping.
    unsigned sum = 0;
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      for (size_t i = 0; i < t.num_bytes; ++i) sum += t.data[i];
    }
    CHECK(sum < (1u << 30));
  }
}

}  // namespace safetensors_file_test
}  // namespace textgen
