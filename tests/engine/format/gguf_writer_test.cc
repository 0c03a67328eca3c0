// GgufWriter -> GgufFile round trips.
#include "engine/format/gguf_writer.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "engine/format/gguf_file.h"
#include "tests/test_util.h"

namespace textgen {
namespace gguf_writer_test {

using ::textgen::testing::ReadFile;
using ::textgen::testing::ScratchDir;
using T = GgufValueType;

template <typename V>
std::vector<uint8_t> AsBytes(const std::vector<V>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(V));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::unique_ptr<GgufFile> WriteAndOpen(const GgufWriter& w, const std::string& name) {
  const std::string path = ScratchDir() + "/" + name;
  absl::Status s = w.Write(path);
  INFO(s.ToString());
  REQUIRE(s.ok());
  auto file = GgufFile::Open(path);
  INFO(file.status().ToString());
  REQUIRE(file.ok());
  return std::move(file).value();
}

TEST_CASE("GGUF round trip of every metadata type", "[gguf][writer]") {
  GgufWriter w;
  w.SetUint8("u8", 255);
  w.SetInt8("i8", -128);
  w.SetUint16("u16", 65535);
  w.SetInt16("i16", -32768);
  w.SetUint32("u32", std::numeric_limits<uint32_t>::max());
  w.SetInt32("i32", std::numeric_limits<int32_t>::min());
  w.SetUint64("u64", std::numeric_limits<uint64_t>::max());
  w.SetInt64("i64", std::numeric_limits<int64_t>::min());
  w.SetFloat32("f32", 1.5f);
  w.SetFloat64("f64", 3.141592653589793);
  w.SetBool("yes", true);
  w.SetBool("no", false);
  w.SetString("empty", "");
  w.SetString("str", std::string("a\0b \xC4\xA0 \xE2\x96\x81x", 11));
  w.SetStringArray("strs", {"x", "", "hello world"});
  w.SetInt32Array("i32s", std::vector<int32_t>{-1, 0, 7});
  w.SetFloat32Array("f32s", std::vector<float>{0.25f, -1e-8f});
  w.Set("u8s", GgufArray(T::kUint8, {GgufUint(T::kUint8, 0), GgufUint(T::kUint8, 200)}));
  w.Set("i8s", GgufArray(T::kInt8, {GgufInt(T::kInt8, -5)}));
  w.Set("u16s", GgufArray(T::kUint16, {GgufUint(T::kUint16, 60000)}));
  w.Set("i16s", GgufArray(T::kInt16, {GgufInt(T::kInt16, -30000)}));
  w.Set("u32s", GgufArray(T::kUint32, {GgufUint(T::kUint32, 4000000000u)}));
  w.Set("u64s", GgufArray(T::kUint64, {GgufUint(T::kUint64, 1ull << 40)}));
  w.Set("i64s", GgufArray(T::kInt64, {GgufInt(T::kInt64, -(1ll << 40))}));
  w.Set("f64s", GgufArray(T::kFloat64, {GgufFloat(T::kFloat64, 1e300)}));
  w.Set("bools", GgufArray(T::kBool, {GgufBool(true), GgufBool(false)}));
  w.Set("empty_arr", GgufArray(T::kUint32, {}));
  w.Set("nested",
        GgufArray(T::kArray, {GgufArray(T::kInt32, {GgufInt(T::kInt32, 1), GgufInt(T::kInt32, 2)}),
                              GgufArray(T::kString, {GgufString("deep")}),
                              GgufArray(T::kArray, {GgufArray(T::kBool, {})})}));
  w.SetUint32("replaced", 1);
  w.SetString("replaced", "now a string");

  auto f = WriteAndOpen(w, "meta.gguf");
  CHECK(f->version() == 3);
  CHECK(f->metadata().size() == 29);
  CHECK(*f->GetUint("u8") == 255);
  CHECK(f->Find("u8")->type == T::kUint8);
  CHECK(*f->GetInt("i8") == -128);
  CHECK(f->Find("i8")->type == T::kInt8);
  CHECK(*f->GetUint("u16") == 65535);
  CHECK(*f->GetInt("i16") == -32768);
  CHECK(*f->GetUint("u32") == std::numeric_limits<uint32_t>::max());
  CHECK(*f->GetInt("i32") == std::numeric_limits<int32_t>::min());
  CHECK(*f->GetUint("u64") == std::numeric_limits<uint64_t>::max());
  CHECK(f->GetInt("u64").status().code() == absl::StatusCode::kInvalidArgument);  // > int64
  CHECK(*f->GetInt("i64") == std::numeric_limits<int64_t>::min());
  CHECK(f->GetUint("i64").status().code() == absl::StatusCode::kInvalidArgument);  // negative
  CHECK(*f->GetFloat("f32") == 1.5);
  CHECK(f->Find("f32")->type == T::kFloat32);
  CHECK(*f->GetFloat("f64") == 3.141592653589793);
  CHECK(*f->GetBool("yes"));
  CHECK(!*f->GetBool("no"));
  CHECK(*f->GetString("empty") == "");
  CHECK(*f->GetString("str") == std::string("a\0b \xC4\xA0 \xE2\x96\x81x", 11));
  CHECK(*f->GetStringArray("strs") == std::vector<std::string>{"x", "", "hello world"});
  CHECK(*f->GetIntArray("i32s") == std::vector<int64_t>{-1, 0, 7});
  CHECK(*f->GetFloatArray("f32s") == std::vector<double>{0.25, static_cast<double>(-1e-8f)});
  CHECK(*f->GetIntArray("u8s") == std::vector<int64_t>{0, 200});
  CHECK(*f->GetIntArray("i8s") == std::vector<int64_t>{-5});
  CHECK(*f->GetIntArray("u16s") == std::vector<int64_t>{60000});
  CHECK(*f->GetIntArray("i16s") == std::vector<int64_t>{-30000});
  CHECK(*f->GetIntArray("u32s") == std::vector<int64_t>{4000000000ll});
  CHECK(*f->GetIntArray("u64s") == std::vector<int64_t>{1ll << 40});
  CHECK(*f->GetIntArray("i64s") == std::vector<int64_t>{-(1ll << 40)});
  CHECK(*f->GetFloatArray("f64s") == std::vector<double>{1e300});
  const GgufValue* bools = f->Find("bools");
  REQUIRE(bools != nullptr);
  CHECK(bools->array_type == T::kBool);
  REQUIRE(bools->array.size() == 2);
  CHECK(std::get<bool>(bools->array[0].scalar));
  CHECK(!std::get<bool>(bools->array[1].scalar));
  CHECK(f->GetIntArray("empty_arr")->empty());
  CHECK(f->Find("empty_arr")->array_type == T::kUint32);

  const GgufValue* nested = f->Find("nested");
  REQUIRE(nested != nullptr);
  CHECK(nested->type == T::kArray);
  CHECK(nested->array_type == T::kArray);
  REQUIRE(nested->array.size() == 3);
  CHECK(nested->array[0].array_type == T::kInt32);
  REQUIRE(nested->array[0].array.size() == 2);
  CHECK(std::get<int64_t>(nested->array[0].array[1].scalar) == 2);
  CHECK(std::get<std::string>(nested->array[1].array[0].scalar) == "deep");
  CHECK(nested->array[2].array_type == T::kArray);
  REQUIRE(nested->array[2].array.size() == 1);
  CHECK(nested->array[2].array[0].array_type == T::kBool);
  CHECK(nested->array[2].array[0].array.empty());
  CHECK(f->GetIntArray("nested").status().code() == absl::StatusCode::kInvalidArgument);

  CHECK(*f->GetString("replaced") == "now a string");
  CHECK(f->tensors().empty());
}

TEST_CASE("GGUF round trip of tensors of every DType with alignment", "[gguf][writer]") {
  const uint32_t alignment = GENERATE(32u, 64u, 1u, 4096u);
  INFO("alignment " << alignment);
  GgufWriter w;
  REQUIRE(w.SetAlignment(alignment).ok());
  w.SetString("general.architecture", "test");

  const std::vector<float> f32 = {1, 2, 3, 4, 5, -6};  // dims {3, 2}
  std::vector<uint16_t> f16;
  for (float x : {0.5f, -1.0f, 65504.0f, 0x1p-24f, 0.0f}) f16.push_back(F32ToF16(x));
  std::vector<uint16_t> bf16;
  for (int i = 0; i < 24; ++i) bf16.push_back(F32ToBF16(static_cast<float>(i) - 12.5f));
  std::vector<uint8_t> q8(2 * kQ8_0BlockBytes);  // dims {64, 1}: one row of two blocks
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 7);

  REQUIRE(w.AddTensor("f32", DType::kF32, {3, 2}, AsBytes(f32)).ok());
  REQUIRE(w.AddTensor("f16", DType::kF16, {5}, AsBytes(f16)).ok());
  REQUIRE(w.AddTensor("bf16", DType::kBf16, {4, 3, 2}, AsBytes(bf16)).ok());
  REQUIRE(w.AddTensor("q8", DType::kQ8_0, {64, 1}, q8).ok());
  // Streamed in uneven pieces, as a synthetic-model tool would.
  std::vector<float> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  REQUIRE(w.AddTensor("streamed", DType::kF32, {10, 10, 5, 2},
                      [&big](GgufTensorSink& sink) -> absl::Status {
                        const auto* p = reinterpret_cast<const uint8_t*>(big.data());
                        size_t done = 0;
                        for (size_t piece = 1; done < big.size() * 4; piece = piece * 3 + 1) {
                          size_t n = std::min(piece, big.size() * 4 - done);
                          absl::Status s = sink.Append(p + done, n);
                          if (!s.ok()) return s;
                          done += n;
                        }
                        return absl::OkStatus();
                      })
              .ok());

  const std::string path = ScratchDir() + "/tensors.gguf";
  REQUIRE(w.Write(path).ok());
  CHECK(!std::filesystem::exists(path + ".tmp"));
  auto in_memory = w.WriteToString();
  REQUIRE(in_memory.ok());
  CHECK(*in_memory == ReadFile(path));
  CHECK(in_memory->size() % alignment == 0);

  auto opened = GgufFile::Open(path);
  INFO(opened.status().ToString());
  REQUIRE(opened.ok());
  const GgufFile& f = **opened;
  CHECK(f.alignment() == alignment);
  CHECK(f.Has("general.alignment") == (alignment != 32));
  CHECK(f.data_offset() % alignment == 0);
  REQUIRE(f.tensors().size() == 5);
  const uint8_t* base = f.tensors()[0].data - f.tensors()[0].offset - f.data_offset();
  for (const GgufTensorInfo& t : f.tensors()) {
    INFO(t.name);
    CHECK(t.offset % alignment == 0);
    CHECK(static_cast<size_t>(t.data - base) % alignment == 0);
  }
  auto check = [&f](const std::string& name, DType type, std::vector<int64_t> dims,
                    const std::vector<uint8_t>& bytes) {
    INFO(name);
    const GgufTensorInfo* t = f.FindTensor(name);
    REQUIRE(t != nullptr);
    CHECK(t->type == type);
    CHECK(t->dims == dims);
    REQUIRE(t->num_bytes == bytes.size());
    CHECK(std::memcmp(t->data, bytes.data(), bytes.size()) == 0);
  };
  check("f32", DType::kF32, {3, 2}, AsBytes(f32));
  check("f16", DType::kF16, {5}, AsBytes(f16));
  check("bf16", DType::kBf16, {4, 3, 2}, AsBytes(bf16));
  check("q8", DType::kQ8_0, {64, 1}, q8);
  check("streamed", DType::kF32, {10, 10, 5, 2}, AsBytes(big));
  CHECK(f.FindTensor("f32")->num_elements == 6);
  CHECK(f.FindTensor("streamed")->num_elements == 1000);
}

TEST_CASE("GgufWriter rejects bad input", "[gguf][writer]") {
  GgufWriter w;
  const std::vector<uint8_t> four_floats(16);
  CHECK(w.SetAlignment(0).code() == absl::StatusCode::kInvalidArgument);
  CHECK(w.SetAlignment(48).code() == absl::StatusCode::kInvalidArgument);
  CHECK(w.AddTensor("", DType::kF32, {4}, four_floats).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.AddTensor("a", DType::kF32, {}, four_floats).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.AddTensor("a", DType::kF32, {1, 1, 1, 1, 4}, four_floats).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.AddTensor("a", DType::kF32, {0, 4}, four_floats).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(w.AddTensor("a", DType::kF32, {5}, four_floats).code() ==
        absl::StatusCode::kInvalidArgument);
  absl::Status q8 = w.AddTensor("q", DType::kQ8_0, {48}, std::vector<uint8_t>(51));
  CHECK(q8.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(q8.message()), Catch::Contains("multiple of 32"));
  REQUIRE(w.AddTensor("a", DType::kF32, {4}, four_floats).ok());
  CHECK(w.AddTensor("a", DType::kF32, {4}, four_floats).code() == absl::StatusCode::kAlreadyExists);
  CHECK(w.SetAlignment(64).code() == absl::StatusCode::kFailedPrecondition);

  SECTION("value that does not fit its type") {
    w.Set("bad", GgufUint(GgufValueType::kUint8, 300));
    auto out = w.WriteToString();
    REQUIRE(!out.ok());
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(out.status().message()), Catch::Contains("'bad'"));
  }
  SECTION("array element of the wrong type") {
    w.Set("bad", GgufArray(GgufValueType::kInt32, {GgufString("x")}));
    CHECK(!w.WriteToString().ok());
  }
  SECTION("filler writing the wrong amount leaves no file") {
    REQUIRE(w.AddTensor("short", DType::kF32, {2}, [](GgufTensorSink& sink) {
               const float x = 1;
               return sink.Append(&x, 4);
             }).ok());
    const std::string path = ScratchDir() + "/short.gguf";
    absl::Status s = w.Write(path);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("'short'"));
    CHECK(!std::filesystem::exists(path));
    CHECK(!std::filesystem::exists(path + ".tmp"));
  }
  SECTION("filler writing too much") {
    REQUIRE(w.AddTensor("long", DType::kF32, {1}, [](GgufTensorSink& sink) {
               const float x[2] = {1, 2};
               return sink.Append(x, 8);
             }).ok());
    CHECK(!w.WriteToString().ok());
  }
}

}  // namespace gguf_writer_test
}  // namespace textgen
