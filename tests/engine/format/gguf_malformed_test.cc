// GgufFile on damaged files: every problem gives a clear error, nothing crashes or reads out of
// bounds (run under ASan/UBSan too).
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "tests/test_util.h"

namespace textgen {
namespace gguf_malformed_test {

using ::textgen::testing::ScratchDir;
using ::textgen::testing::WriteFile;
using T = GgufValueType;

// A small valid file touching every section. Tensor names have equal lengths so one can be
// renamed into the other by patching a byte.
std::string ValidFile() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("test.u32", 7);
  w.SetStringArray("test.tokens", {"a", "bb", "ccc"});
  w.Set("test.nested", GgufArray(T::kArray, {GgufArray(T::kInt32, {GgufInt(T::kInt32, 1)})}));
  w.SetBool("test.flag", true);
  w.SetUint32("dup.a", 1);
  w.SetUint32("dup.b", 2);
  std::vector<uint8_t> f32(4 * 2 * 4, 0);
  REQUIRE(w.AddTensor("tensor.aa", DType::kF32, {4, 2}, f32).ok());
  std::vector<uint8_t> q8(kQ8_0BlockBytes, 1);
  REQUIRE(w.AddTensor("tensor.bb", DType::kQ8_0, {32, 1}, q8).ok());
  auto bytes = w.WriteToString();
  REQUIRE(bytes.ok());
  return *bytes;
}

// Offset of the one occurrence of `needle` in `bytes`.
size_t Find(const std::string& bytes, const std::string& needle) {
  size_t pos = bytes.find(needle);
  REQUIRE(pos != std::string::npos);
  REQUIRE(bytes.find(needle, pos + 1) == std::string::npos);
  return pos;
}

template <typename V>
void Patch(std::string* bytes, size_t offset, V value) {
  REQUIRE(offset + sizeof(V) <= bytes->size());
  std::memcpy(bytes->data() + offset, &value, sizeof(V));
}

struct Opened {
  std::string path;
  absl::StatusOr<std::unique_ptr<GgufFile>> file;
};

Opened OpenBytes(const std::string& bytes) {
  const std::string path = ScratchDir() + "/file.gguf";
  WriteFile(path, bytes);
  return {path, GgufFile::Open(path)};
}

// Opens `bytes` and expects the error `code` with a message naming `needle` and the file.
void ExpectError(const std::string& bytes, absl::StatusCode code, const std::string& needle) {
  Opened o = OpenBytes(bytes);
  REQUIRE(!o.file.ok());
  INFO(o.file.status().ToString());
  CHECK(o.file.status().code() == code);
  CHECK_THAT(std::string(o.file.status().message()),
             Catch::Contains(needle) && Catch::Contains(o.path));
}

// Tensor info layout after the name: n_dims u32, dims u64[2], type u32, offset u64.
size_t TensorInfo(const std::string& bytes, const std::string& name) {
  return Find(bytes, name) + name.size();
}

TEST_CASE("the base file is valid", "[gguf][malformed]") {
  Opened o = OpenBytes(ValidFile());
  INFO(o.file.status().ToString());
  REQUIRE(o.file.ok());
  CHECK((*o.file)->tensors().size() == 2);
  CHECK(*(*o.file)->GetUint("dup.b") == 2);
}

TEST_CASE("GGUF header errors", "[gguf][malformed]") {
  std::string b = ValidFile();
  SECTION("bad magic") {
    b[0] = 'X';
    ExpectError(b, absl::StatusCode::kInvalidArgument, "bad magic");
  }
  SECTION("version 1 and 4 are unsupported, 2 is accepted") {
    Patch<uint32_t>(&b, 4, 1);
    ExpectError(b, absl::StatusCode::kUnimplemented, "unsupported GGUF version 1");
    Patch<uint32_t>(&b, 4, 4);
    ExpectError(b, absl::StatusCode::kUnimplemented, "unsupported GGUF version 4");
    Patch<uint32_t>(&b, 4, 0x03000000);
    ExpectError(b, absl::StatusCode::kUnimplemented, "big-endian");
    Patch<uint32_t>(&b, 4, 2);
    Opened o = OpenBytes(b);
    REQUIRE(o.file.ok());
    CHECK((*o.file)->version() == 2);
  }
  SECTION("huge kv_count") {
    Patch<uint64_t>(&b, 16, uint64_t{1} << 60);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "kv_count");
  }
  SECTION("kv_count one too many runs into the tensor infos") {
    Patch<uint64_t>(&b, 16, 8);
    Opened o = OpenBytes(b);
    CHECK(!o.file.ok());
  }
  SECTION("huge tensor_count") {
    Patch<uint64_t>(&b, 8, ~uint64_t{0});
    ExpectError(b, absl::StatusCode::kInvalidArgument, "tensor_count");
  }
  SECTION("empty file") { ExpectError("", absl::StatusCode::kInvalidArgument, "truncated"); }
}

TEST_CASE("GGUF metadata errors", "[gguf][malformed]") {
  std::string b = ValidFile();
  SECTION("invalid value type") {
    Patch<uint32_t>(&b, Find(b, "test.u32") + 8, 13);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "invalid value type 13");
  }
  SECTION("invalid array element type") {
    Patch<uint32_t>(&b, Find(b, "test.tokens") + 11 + 4, 99);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "invalid value type 99");
  }
  SECTION("string length beyond the file") {
    Patch<uint64_t>(&b, Find(b, "llama") - 8, uint64_t{1} << 40);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "string length 1099511627776");
  }
  SECTION("key length beyond the file") {
    Patch<uint64_t>(&b, Find(b, "general.architecture") - 8, ~uint64_t{0});
    ExpectError(b, absl::StatusCode::kInvalidArgument, "exceeds the remaining");
  }
  SECTION("array count that cannot fit") {
    Patch<uint64_t>(&b, Find(b, "test.tokens") + 11 + 8, uint64_t{1} << 62);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "array count 4611686018427387904");
  }
  SECTION("nested array count that cannot fit") {
    // test.nested: type(4) elem_type(4) count(8) then the inner array's elem_type and count.
    Patch<uint64_t>(&b, Find(b, "test.nested") + 11 + 16 + 4, uint64_t{1} << 50);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "array count");
  }
  SECTION("duplicate key") {
    b[Find(b, "dup.b") + 4] = 'a';
    ExpectError(b, absl::StatusCode::kInvalidArgument, "duplicate metadata key 'dup.a'");
  }
  SECTION("alignment not a power of two") {
    GgufWriter w;
    w.SetUint32("general.alignment", 48);
    ExpectError(*w.WriteToString(), absl::StatusCode::kInvalidArgument, "general.alignment");
  }
  SECTION("alignment of the wrong type") {
    GgufWriter w;
    w.SetString("general.alignment", "32");
    ExpectError(*w.WriteToString(), absl::StatusCode::kInvalidArgument, "general.alignment");
  }
  SECTION("arrays nested too deep") {
    // Hand-made: one key whose value is 100 arrays each holding one array.
    std::string h("GGUF", 4);
    auto put32 = [&h](uint32_t v) { h.append(reinterpret_cast<const char*>(&v), 4); };
    auto put64 = [&h](uint64_t v) { h.append(reinterpret_cast<const char*>(&v), 8); };
    put32(3);
    put64(0);
    put64(1);
    put64(4);
    h += "deep";
    put32(9);
    for (int i = 0; i < 100; ++i) {
      put32(9);
      put64(1);
    }
    put32(4);
    put64(0);
    ExpectError(h, absl::StatusCode::kInvalidArgument, "nested deeper");
  }
}

TEST_CASE("GGUF tensor info errors", "[gguf][malformed]") {
  std::string b = ValidFile();
  const size_t aa = TensorInfo(b, "tensor.aa");
  const size_t bb = TensorInfo(b, "tensor.bb");
  SECTION("duplicate tensor name") {
    b[bb - 1] = 'a';
    b[bb - 2] = 'a';
    ExpectError(b, absl::StatusCode::kInvalidArgument, "duplicate tensor name 'tensor.aa'");
  }
  SECTION("n_dims 0 and 5") {
    Patch<uint32_t>(&b, aa, 5);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "n_dims 5");
    Patch<uint32_t>(&b, aa, 0);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "n_dims 0");
  }
  SECTION("zero dimension") {
    Patch<uint64_t>(&b, aa + 4 + 8, 0);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "dimension 1 is 0");
  }
  SECTION("element count overflow") {
    Patch<uint64_t>(&b, aa + 4, uint64_t{1} << 40);
    Patch<uint64_t>(&b, aa + 12, uint64_t{1} << 40);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "overflow");
  }
  SECTION("dimension above int64") {
    Patch<uint64_t>(&b, aa + 4, ~uint64_t{0});
    ExpectError(b, absl::StatusCode::kInvalidArgument, "dimension 0");
  }
  SECTION("unsupported tensor type") {
    Patch<uint32_t>(&b, aa + 20, 16);
    ExpectError(b, absl::StatusCode::kUnimplemented, "tensor.aa");
    ExpectError(b, absl::StatusCode::kUnimplemented, "16 (IQ2_XXS)");
  }
  SECTION("unknown tensor type id") {
    Patch<uint32_t>(&b, aa + 20, 1000);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "tensor 'tensor.aa'");
    ExpectError(b, absl::StatusCode::kInvalidArgument, "1000");
  }
  SECTION("Q8_0 row length not a multiple of 32") {
    Patch<uint64_t>(&b, bb + 4, 48);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "not a multiple of 32");
  }
  SECTION("misaligned offset") {
    uint64_t off;
    std::memcpy(&off, b.data() + bb + 24, 8);
    Patch<uint64_t>(&b, bb + 24, off + 4);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "not a multiple of the alignment 32");
  }
  SECTION("data out of bounds") {
    Patch<uint64_t>(&b, bb + 24, 1 << 20);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "tensor 'tensor.bb': data out of bounds");
  }
  SECTION("offset near 2^64 does not wrap around") {
    Patch<uint64_t>(&b, bb + 24, ~uint64_t{31});
    ExpectError(b, absl::StatusCode::kInvalidArgument, "out of bounds");
  }
  SECTION("dims too big for the file") {
    Patch<uint64_t>(&b, aa + 12, 1000);
    ExpectError(b, absl::StatusCode::kInvalidArgument, "tensor 'tensor.aa': data out of bounds");
  }
}

TEST_CASE("every truncated prefix of a GGUF file is an error", "[gguf][malformed]") {
  const std::string b = ValidFile();
  Opened full = OpenBytes(b);
  REQUIRE(full.file.ok());
  // The file ends with padding after the last tensor, which a reader cannot miss.
  const GgufTensorInfo& last = (*full.file)->tensors().back();
  const size_t needed = (*full.file)->data_offset() + last.offset + last.num_bytes;
  REQUIRE(needed <= b.size());
  const std::string dir = ScratchDir();
  for (size_t n = 0; n < b.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    // A fresh name each time: truncating an existing file makes ext4 flush it, which is slow.
    const std::string path = dir + "/prefix" + std::to_string(n) + ".gguf";
    WriteFile(path, b.substr(0, n));
    auto f = GgufFile::Open(path);
    if (n < needed) {
      REQUIRE(!f.ok());
      REQUIRE(f.status().code() == absl::StatusCode::kInvalidArgument);
      REQUIRE_THAT(std::string(f.status().message()), Catch::Contains(path));
    } else {
      REQUIRE(f.ok());
    }
    std::filesystem::remove(path);
  }
}

TEST_CASE("random corruption never crashes", "[gguf][malformed]") {
  const std::string b = ValidFile();
  const std::string dir = ScratchDir();
  int failures = 0;
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    std::mt19937 rng(seed);
    std::string c = b;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i) {
      // Mostly the header, where the structure is; sometimes anywhere.
      const size_t limit = (rng() % 4 == 0) ? c.size() : std::min<size_t>(c.size(), 200);
      const size_t at = rng() % limit;
      switch (rng() % 3) {
        case 0:
          c[at] = static_cast<char>(rng());
          break;
        case 1:
          c[at] ^= static_cast<char>(1u << (rng() % 8));
          break;
        default:
          c[at] = static_cast<char>(0xff);
          break;
      }
    }
    if (seed % 5 == 0) c.resize(rng() % (c.size() + 1));
    const std::string path = dir + "/corrupt" + std::to_string(seed) + ".gguf";
    WriteFile(path, c);
    auto f = GgufFile::Open(path);
    std::filesystem::remove(path);  // the mapping stays valid
    if (!f.ok()) {
      ++failures;
      continue;
    }
    // Whatever was accepted must be internally consistent.
    unsigned sum = 0;
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      INFO("seed " << seed << " tensor " << t.name);
      REQUIRE(t.num_elements > 0);
      REQUIRE((*f)->data_offset() + t.offset + t.num_bytes <= c.size());
      // Touch every byte accepted as tensor data: ASan flags any outside the mapping.
      for (size_t i = 0; i < t.num_bytes; ++i) sum += t.data[i];
    }
    CHECK(sum < (1u << 30));
  }
  CHECK(failures > 0);
}

}  // namespace gguf_malformed_test
}  // namespace textgen
