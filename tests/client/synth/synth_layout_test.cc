// The shape table and the RoPE factor rules of textgen-synth-model (client/synth/synth_layout.h).
#include "client/synth/synth_layout.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "tests/test_util.h"

namespace textgen {
namespace synth_layout_test {

TEST_CASE("every named synth shape is valid for every type and names its vocab", "[synth]") {
  std::set<std::string> names, archs;
  for (const SynthShape& s : SynthShapes()) {
    INFO("shape " << s.name);
    CHECK(names.insert(s.name).second);
    archs.insert(s.arch);
    for (DType t : {DType::kF32, DType::kF16, DType::kBf16, DType::kQ8_0}) {
      CHECK(ValidateSynthShape(s, t).ok());
    }
    CHECK(std::filesystem::exists(testing::ModelPath("vocab/" + s.vocab)));
    CHECK(s.heads % s.kv_heads == 0);
  }
  // The families the benchmark covers: every architecture the writer lays out.
  CHECK(archs == std::set<std::string>(std::begin(kSynthArchs), std::end(kSynthArchs)));
}

TEST_CASE("Llama3RopeFactors gives llama.cpp converter's rope_freqs", "[synth]") {
  // The arch test model was written by llama.cpp's convert_hf_to_gguf.py from rope_scaling
  // {llama3, factor 8, low 1, high 4, original 128}, head_dim 16, theta 10000.
  auto gguf = GgufFile::Open(testing::ModelPath("arch/llama-rope-llama3.gguf"));
  REQUIRE(gguf.ok());
  const GgufTensorInfo* t = (*gguf)->FindTensor("rope_freqs.weight");
  REQUIRE(t != nullptr);
  REQUIRE(t->num_elements == 8);
  std::vector<float> want(8);
  ToF32(DType::kF32, t->data, want.data(), 8);
  const std::vector<float> got = Llama3RopeFactors(16, 10000.0f, 8.0f, 128);
  REQUIRE(got.size() == 8);
  for (int i = 0; i < 8; ++i) {
    INFO("pair " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-6));
  }
}

TEST_CASE("ValidateSynthShape names the flag at fault", "[synth]") {
  SynthShape s{.name = "custom", .dim = 64, .layers = 2, .heads = 4, .kv_heads = 2, .ffn = 128};
  CHECK(ValidateSynthShape(s, DType::kQ8_0).ok());
  SynthShape bad_arch = s;
  bad_arch.arch = "rwkv";
  CHECK_THAT(std::string(ValidateSynthShape(bad_arch, DType::kF32).message()),
             Catch::StartsWith("--arch"));
  SynthShape odd_head = s;
  odd_head.head_dim = 15;
  CHECK_THAT(std::string(ValidateSynthShape(odd_head, DType::kF32).message()),
             Catch::StartsWith("--heads"));
  SynthShape q8_rows = s;
  q8_rows.head_dim = 20;  // attn_output rows of 4 * 20 = 80 values
  CHECK(ValidateSynthShape(q8_rows, DType::kF32).ok());
  CHECK_THAT(std::string(ValidateSynthShape(q8_rows, DType::kQ8_0).message()),
             Catch::StartsWith("--heads"));
}

}  // namespace synth_layout_test
}  // namespace textgen
