// GgufFile against the real model files in $TEXTGEN_MODELS.
#include "engine/format/gguf_file.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/format/safetensors_file.h"
#include "tests/test_util.h"

namespace textgen {
namespace gguf_file_test {

using ::textgen::testing::ModelPath;

std::unique_ptr<GgufFile> OpenOrFail(const std::string& path) {
  auto file = GgufFile::Open(path);
  INFO(file.status().ToString());
  REQUIRE(file.ok());
  return std::move(file).value();
}

std::vector<float> Dequantize(const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.num_elements));
  ToF32(t.type, t.data, out.data(), t.num_elements);
  return out;
}

TEST_CASE("stories260K.gguf metadata and tensors", "[gguf][models]") {
  auto gguf = OpenOrFail(ModelPath("stories260K.gguf"));
  CHECK(gguf->version() == 3);
  CHECK(gguf->alignment() == 32);
  CHECK(gguf->data_offset() % 32 == 0);
  CHECK(*gguf->GetString("general.architecture") == "llama");
  CHECK(*gguf->GetUint("llama.embedding_length") == 64);
  CHECK(*gguf->GetUint("llama.block_count") == 5);
  CHECK(*gguf->GetInt("llama.attention.head_count_kv") == 4);
  CHECK(*gguf->GetUint("tokenizer.ggml.seperator_token_id") == 4294967295u);
  CHECK(*gguf->GetFloat("llama.attention.layer_norm_rms_epsilon") == Approx(1e-5).epsilon(1e-6));
  CHECK(*gguf->GetFloat("llama.context_length") == 2048.0);  // integers widen to double

  auto tokens = gguf->GetStringArray("tokenizer.ggml.tokens");
  REQUIRE(tokens.ok());
  REQUIRE(tokens->size() == 512);
  CHECK((*tokens)[0] == "<unk>");
  CHECK((*tokens)[1] == "<s>");
  CHECK((*tokens)[2] == "</s>");
  CHECK(gguf->GetFloatArray("tokenizer.ggml.scores")->size() == 512);
  auto types = gguf->GetIntArray("tokenizer.ggml.token_type");
  REQUIRE(types.ok());
  CHECK((*types)[0] == 2);
  CHECK((*types)[1] == 3);

  const GgufValue* v = gguf->Find("tokenizer.ggml.tokens");
  REQUIRE(v != nullptr);
  CHECK(v->type == GgufValueType::kArray);
  CHECK(v->array_type == GgufValueType::kString);

  // Typed getters refuse mismatched types and absent keys.
  CHECK(gguf->GetString("llama.block_count").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(gguf->GetUint("general.name").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(gguf->GetBool("llama.block_count").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(gguf->GetStringArray("tokenizer.ggml.scores").status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto missing = gguf->GetUint("no.such.key");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("no.such.key"));
  CHECK(!gguf->Has("no.such.key"));

  CHECK(gguf->tensors().size() == 48);
  const GgufTensorInfo* emb = gguf->FindTensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->type == DType::kF32);
  CHECK(emb->dims == std::vector<int64_t>{64, 512});
  CHECK(emb->num_elements == 64 * 512);
  CHECK(emb->num_bytes == 64 * 512 * 4);
  CHECK(gguf->FindTensor("nope") == nullptr);
  const GgufTensorInfo* ffn_down = gguf->FindTensor("blk.4.ffn_down.weight");
  REQUIRE(ffn_down != nullptr);
  CHECK(ffn_down->dims == std::vector<int64_t>{172, 64});
  for (float x : Dequantize(*emb)) REQUIRE(std::isfinite(x));
}

TEST_CASE("TinyStories-656K Q8_0 matches the F32 file within Q8_0 error", "[gguf][models]") {
  auto q8 = OpenOrFail(ModelPath("TinyStories-656K-Q8_0.gguf"));
  auto f32 = OpenOrFail(ModelPath("TinyStories-656K-F32.gguf"));
  CHECK(*q8->GetUint("llama.embedding_length") == 128);
  CHECK(*q8->GetBool("tokenizer.ggml.add_bos_token"));
  CHECK(!*q8->GetBool("tokenizer.ggml.add_eos_token"));
  CHECK(q8->GetStringArray("general.languages")->at(0) == "en");
  CHECK(q8->tensors().size() == 20);
  CHECK(f32->tensors().size() == 20);

  int q8_tensors = 0;
  for (const GgufTensorInfo& t : q8->tensors()) {
    INFO("tensor " << t.name);
    const GgufTensorInfo* ref = f32->FindTensor(t.name);
    REQUIRE(ref != nullptr);
    REQUIRE(ref->type == DType::kF32);
    REQUIRE(ref->dims == t.dims);
    const std::vector<float> got = Dequantize(t);
    const std::vector<float> want = Dequantize(*ref);
    if (t.type != DType::kQ8_0) {
      CHECK(got == want);
      continue;
    }
    ++q8_tensors;
    // Per block, q = round(x / d) with d = max|x| / 127 stored as F16: the error is at most
    // half a step plus the scale's own F16 rounding (2^-11 relative, times |q| <= 127).
    for (int64_t b = 0; b < t.num_elements / kQ8_0BlockSize; ++b) {
      uint16_t dh;
      std::memcpy(&dh, t.data + b * kQ8_0BlockBytes, 2);
      const float d = std::fabs(F16ToF32(dh));
      for (int64_t i = b * kQ8_0BlockSize; i < (b + 1) * kQ8_0BlockSize; ++i) {
        REQUIRE(std::isfinite(got[i]));
        REQUIRE(std::fabs(got[i] - want[i]) <= 0.57f * d + 1e-7f);
      }
    }
  }
  CHECK(q8_tensors == 15);
}

TEST_CASE("GPT-2 vocab file: 50257 tokens, 50000 merges, no tensors", "[gguf][models]") {
  const auto start = std::chrono::steady_clock::now();
  auto gguf = OpenOrFail(ModelPath("vocab/ggml-vocab-gpt-2.gguf"));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("ggml-vocab-gpt-2.gguf opened in " << secs * 1000 << " ms");
  CHECK(gguf->tensors().empty());
  auto tokens = gguf->GetStringArray("tokenizer.ggml.tokens");
  REQUIRE(tokens.ok());
  CHECK(tokens->size() == 50257);
  CHECK((*tokens)[0] == "!");
  CHECK(tokens->back() == "<|endoftext|>");
  auto merges = gguf->GetStringArray("tokenizer.ggml.merges");
  REQUIRE(merges.ok());
  CHECK(merges->size() == 50000);
  CHECK((*merges)[0] == "\xC4\xA0 t");  // "Ġ t"
  CHECK(*gguf->GetUint("tokenizer.ggml.bos_token_id") == 50256);
  CHECK(*gguf->GetString("tokenizer.ggml.model") == "gpt2");
}

TEST_CASE("Llama SPM vocab file opens", "[gguf][models]") {
  auto gguf = OpenOrFail(ModelPath("vocab/ggml-vocab-llama-spm.gguf"));
  CHECK(gguf->GetStringArray("tokenizer.ggml.tokens")->size() == 32000);
}

TEST_CASE("tinystories-656k-hf safetensors tensors", "[safetensors][models]") {
  auto st = SafetensorsFile::Open(ModelPath("tinystories-656k-hf/model.safetensors"));
  INFO(st.status().ToString());
  REQUIRE(st.ok());
  const SafetensorsFile& file = **st;
  CHECK(file.tensors().size() == 20);
  CHECK(file.metadata().at("format") == "pt");
  const SafetensorsTensor* lm_head = file.FindTensor("lm_head.weight");
  REQUIRE(lm_head != nullptr);
  CHECK(lm_head->type == DType::kF32);
  CHECK(lm_head->shape == std::vector<int64_t>{2048, 128});
  CHECK(lm_head->num_bytes == 2048 * 128 * 4);
  const SafetensorsTensor* k = file.FindTensor("model.layers.1.self_attn.k_proj.weight");
  REQUIRE(k != nullptr);
  CHECK(k->shape == std::vector<int64_t>{64, 128});
  const SafetensorsTensor* norm = file.FindTensor("model.norm.weight");
  REQUIRE(norm != nullptr);
  CHECK(norm->shape == std::vector<int64_t>{128});
  CHECK(file.tensors().front().name == "lm_head.weight");  // data-offset order
  CHECK(file.tensors().back().name == "model.norm.weight");

  // The F32 GGUF was rebuilt from these weights; with tied embeddings lm_head is token_embd,
  // stored [2048, 128] row-major here and as dims {128, 2048} there: the same bytes.
  auto gguf = OpenOrFail(ModelPath("TinyStories-656K-F32.gguf"));
  const GgufTensorInfo* emb = gguf->FindTensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  REQUIRE(emb->num_bytes == lm_head->num_bytes);
  CHECK(std::memcmp(emb->data, lm_head->data, emb->num_bytes) == 0);
  const GgufTensorInfo* ffn_down = gguf->FindTensor("blk.1.ffn_down.weight");
  const SafetensorsTensor* down = file.FindTensor("model.layers.1.mlp.down_proj.weight");
  REQUIRE(ffn_down != nullptr);
  REQUIRE(down != nullptr);
  CHECK(ffn_down->dims == std::vector<int64_t>{down->shape[1], down->shape[0]});
  CHECK(std::memcmp(ffn_down->data, down->data, down->num_bytes) == 0);
}

}  // namespace gguf_file_test
}  // namespace textgen
