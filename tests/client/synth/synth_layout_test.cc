// The shape table and the RoPE factor rules of textgen-synth-model (client/synth/synth_layout.h).
#include "client/synth/synth_layout.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
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

// (name, type, dims) of every tensor, and the `<arch>.*` keys of a GGUF.
using TensorSet = std::set<std::tuple<std::string, DType, std::vector<int64_t>>>;
TensorSet TensorsOf(const GgufFile& g) {
  TensorSet out;
  for (const GgufTensorInfo& t : g.tensors()) out.emplace(t.name, t.type, t.dims);
  return out;
}
std::map<std::string, GgufValue> ArchKeys(const GgufFile& g, const std::string& arch) {
  std::map<std::string, GgufValue> out;
  for (const auto& [key, value] : g.metadata()) {
    if (key.starts_with(arch + ".")) out.emplace(key, value);
  }
  return out;
}

TEST_CASE("the gpt-oss layout is what llama.cpp's converter writes", "[synth]") {
  // moe/gpt-oss.gguf was written by convert_hf_to_gguf.py-style code for gpt-oss and loads in
  // llama.cpp (moe/README.md): the same hyperparameters give the same keys, values and tensors.
  auto ref = GgufFile::Open(testing::ModelPath("moe/gpt-oss.gguf"));
  REQUIRE(ref.ok());
  const SynthShape s{.name = "custom",
                     .arch = "gpt-oss",
                     .dim = 128,
                     .layers = 2,
                     .heads = 8,
                     .kv_heads = 4,
                     .ffn = 192,
                     .ctx = 16384,
                     .head_dim = 16,
                     .rope_base = 10000.0f,
                     .rms_eps = 1e-6f,
                     .sliding_window = 16,
                     .yarn_factor = 32.0f,
                     .yarn_orig_ctx = 512,
                     .n_expert = 4,
                     .n_expert_used = 2,
                     .expert_ffn = 192};
  REQUIRE(ValidateSynthShape(s, DType::kMXFP4).ok());
  GgufWriter w;
  SetSynthHyperparameters(w, s, 2048);
  SynthTotals totals;
  REQUIRE(AddSynthTensors(w, s, DType::kF32, 2048, 1, &totals, 1).ok());
  const std::string path = testing::ScratchDir() + "/gpt-oss-layout.gguf";
  REQUIRE(w.Write(path).ok());
  auto ours = GgufFile::Open(path);
  REQUIRE(ours.ok());

  CHECK(TensorsOf(**ours) == TensorsOf(**ref));
  const auto want = ArchKeys(**ref, "gpt-oss"), got = ArchKeys(**ours, "gpt-oss");
  CHECK(got.size() == want.size());
  for (const auto& [key, value] : want) {
    INFO(key);
    auto it = got.find(key);
    REQUIRE(it != got.end());
    CHECK(it->second.type == value.type);
    CHECK(it->second.scalar == value.scalar);
  }
}

TEST_CASE("the gpt-oss-20b shape has the model card's 20.9 B parameters", "[synth]") {
  // OpenAI's gpt-oss model card: 20.91 B parameters in total, 3.61 B active (4 of 32 experts,
  // embeddings not counted). No tensor is generated: fillers run only on Write.
  const SynthShape* s = nullptr;
  for (const SynthShape& shape : SynthShapes()) {
    if (shape.name == "gpt-oss-20b") s = &shape;
  }
  REQUIRE(s != nullptr);
  REQUIRE(s->vocab_size == 201088);
  GgufWriter w;
  SynthTotals totals;
  REQUIRE(AddSynthTensors(w, *s, DType::kMXFP4, s->vocab_size, 1, &totals).ok());
  CHECK(totals.params == Approx(20.91e9).epsilon(0.005));
  const int64_t expert = 3 * int64_t{s->dim} * s->ExpertFfn();
  const int64_t active = totals.params - int64_t{s->vocab_size} * s->dim -
                         int64_t{s->layers} * (s->n_expert - s->n_expert_used) * expert;
  CHECK(active == Approx(3.61e9).epsilon(0.01));
}

}  // namespace synth_layout_test
}  // namespace textgen
