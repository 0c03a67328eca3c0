// Model loading: GGUF and Hugging Face checkpoints, and the errors for broken models.
#include "engine/model/model.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "engine/format/gguf_writer.h"
#include "tests/test_util.h"

namespace textgen {
namespace model_test {

// Copies an F32 GGUF (stories260K.gguf unless `model` names another under $TEXTGEN_MODELS)
// with edits: `meta` may change metadata, `keep` drops tensors, `reshape` may change a tensor's
// dims (its data is then cut or padded to fit).
std::string WriteEditedModel(
    const std::function<void(GgufWriter&)>& meta,
    const std::function<bool(const std::string&)>& keep = [](const std::string&) { return true; },
    const std::function<void(const std::string&, std::vector<int64_t>&)>& reshape =
        [](const std::string&, std::vector<int64_t>&) {},
    const std::string& model = "stories260K.gguf") {
  auto src = GgufFile::Open(testing::ModelPath(model));
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) w.Set(key, value);
  meta(w);
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    if (!keep(t.name)) continue;
    std::vector<int64_t> dims = t.dims;
    reshape(t.name, dims);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<uint8_t> bytes(n * sizeof(float), 0);
    std::memcpy(bytes.data(), t.data, std::min(bytes.size(), t.num_bytes));
    REQUIRE(w.AddTensor(t.name, t.type, dims, bytes).ok());
  }
  std::string path = testing::ScratchDir() + "/model.gguf";
  REQUIRE(w.Write(path).ok());
  return path;
}

TEST_CASE("loads GGUF and Hugging Face models with their configs", "[model]") {
  auto gguf = Model::Load(testing::ModelPath("TinyStories-656K-F32.gguf"));
  REQUIRE(gguf.ok());
  const ModelConfig& c = (*gguf)->config();
  CHECK(c.n_vocab == 2048);
  CHECK(c.n_embd == 128);
  CHECK(c.n_layers == 2);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.n_ff == 384);
  CHECK(c.n_ctx == 512);
  CHECK(c.tied_embeddings);
  CHECK((*gguf)->format() == "gguf");

  auto hf = Model::Load(testing::ModelPath("tinystories-656k-hf"));
  REQUIRE(hf.ok());
  const ModelConfig& h = (*hf)->config();
  CHECK(h.n_vocab == c.n_vocab);
  CHECK(h.n_embd == c.n_embd);
  CHECK(h.n_kv_heads == c.n_kv_heads);
  CHECK(h.rope_dim == c.rope_dim);
  CHECK(h.tied_embeddings);
  CHECK((*hf)->format() == "safetensors");

  auto small = Model::Load(testing::ModelPath("stories260K.gguf"));
  REQUIRE(small.ok());
  CHECK_FALSE((*small)->config().tied_embeddings);
  CHECK((*small)->config().rope_base == 10000.0f);  // absent key: llama.cpp's default
}

TEST_CASE("a copy of a model loads (the edit helper itself is sound)", "[model]") {
  std::string path = WriteEditedModel([](GgufWriter&) {});
  auto m = Model::Load(path);
  REQUIRE(m.ok());
}

TEST_CASE("loading names the problem with a broken model", "[model]") {
  SECTION("unknown architecture") {
    std::string path =
        WriteEditedModel([](GgufWriter& w) { w.SetString("general.architecture", "mamba"); });
    auto m = Model::Load(path);
    REQUIRE(m.status().code() == absl::StatusCode::kUnimplemented);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("unknown architecture 'mamba'"));
  }
  SECTION("missing tensor") {
    std::string path = WriteEditedModel(
        [](GgufWriter&) {}, [](const std::string& name) { return name != "blk.3.ffn_up.weight"; });
    auto m = Model::Load(path);
    REQUIRE(m.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("missing tensor blk.3.ffn_up.weight"));
  }
  SECTION("shape mismatch") {
    std::string path = WriteEditedModel([](GgufWriter&) {}, [](const std::string&) { return true; },
                                        [](const std::string& name, std::vector<int64_t>& dims) {
                                          if (name == "blk.1.attn_k.weight") dims = {64, 48};
                                        });
    auto m = Model::Load(path);
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("shape mismatch for tensor blk.1.attn_k.weight"));
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("[48, 64]"));
  }
  SECTION("mixture-of-experts hyperparameters out of range") {
    auto keep_all = [](const std::string&) { return true; };
    auto same = [](const std::string&, std::vector<int64_t>&) {};
    const std::string moe = "moe/mixtral.gguf";
    struct Edit {
      const char* key;
      uint32_t value;
      const char* message;
    };
    for (const Edit& e : {Edit{"llama.expert_used_count", 5, "experts used per token"},
                          Edit{"llama.expert_used_count", 0, "experts used per token"},
                          Edit{"llama.expert_count", 5000, "expert count"}}) {
      INFO(e.key << " = " << e.value);
      const std::string path = WriteEditedModel([&](GgufWriter& w) { w.SetUint32(e.key, e.value); },
                                                keep_all, same, moe);
      auto m = Model::Load(path);
      REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(m.status().message()), Catch::Contains(e.message));
    }
    // qwen3moe without an expert count is not a model this engine can run.
    auto src = GgufFile::Open(testing::ModelPath("moe/qwen3moe.gguf"));
    REQUIRE(src.ok());
    GgufWriter w;
    for (const auto& [key, value] : (*src)->metadata()) {
      if (key != "qwen3moe.expert_count") w.Set(key, value);
    }
    const std::string no_count = testing::ScratchDir() + "/nocount.gguf";
    REQUIRE(w.Write(no_count).ok());
    auto m = Model::Load(no_count);
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("needs an expert count"));
  }
  SECTION("a missing or misshapen expert stack") {
    auto m = Model::Load(WriteEditedModel(
        [](GgufWriter&) {},
        [](const std::string& name) { return name != "blk.1.ffn_down_exps.weight"; },
        [](const std::string&, std::vector<int64_t>&) {}, "moe/qwen3moe.gguf"));
    REQUIRE(m.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("missing tensor blk.1.ffn_down_exps.weight"));
    m = Model::Load(WriteEditedModel([](GgufWriter&) {}, [](const std::string&) { return true; },
                                     [](const std::string& name, std::vector<int64_t>& dims) {
                                       if (name == "blk.0.ffn_up_exps.weight")
                                         dims[2] = 3;  // 3 experts of 8
                                     },
                                     "moe/qwen3moe.gguf"));
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("shape mismatch for tensor blk.0.ffn_up_exps.weight"));
  }
  SECTION("gpt-oss without a sink or bias tensor") {
    for (const char* name :
         {"blk.0.attn_sinks.weight", "blk.1.attn_output.bias", "blk.1.ffn_gate_inp.bias",
          "blk.0.ffn_gate_exps.bias", "blk.1.ffn_up_exps.bias", "blk.0.ffn_down_exps.bias",
          "blk.1.post_attention_norm.weight"}) {
      INFO(name);
      auto m = Model::Load(
          WriteEditedModel([](GgufWriter&) {}, [&](const std::string& t) { return t != name; },
                           [](const std::string&, std::vector<int64_t>&) {}, "moe/gpt-oss.gguf"));
      REQUIRE(m.status().code() == absl::StatusCode::kNotFound);
      CHECK_THAT(std::string(m.status().message()),
                 Catch::Contains(std::string("missing tensor ") + name));
    }
    // A down bias of the wrong width, and YaRN keys out of range.
    auto m =
        Model::Load(WriteEditedModel([](GgufWriter&) {}, [](const std::string&) { return true; },
                                     [](const std::string& name, std::vector<int64_t>& dims) {
                                       if (name == "blk.0.ffn_down_exps.bias") dims[0] = 64;
                                     },
                                     "moe/gpt-oss.gguf"));
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("shape mismatch for tensor blk.0.ffn_down_exps.bias"));
    m = Model::Load(WriteEditedModel(
        [](GgufWriter& w) { w.SetUint32("gpt-oss.rope.scaling.original_context_length", 0); },
        [](const std::string&) { return true; }, [](const std::string&, std::vector<int64_t>&) {},
        "moe/gpt-oss.gguf"));
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("YaRN"));
    // A NaN sink would turn its head's attention into NaN: refused at load.
    auto src = GgufFile::Open(testing::ModelPath("moe/gpt-oss.gguf"));
    REQUIRE(src.ok());
    GgufWriter w;
    for (const auto& [key, value] : (*src)->metadata()) w.Set(key, value);
    for (const GgufTensorInfo& t : (*src)->tensors()) {
      std::vector<uint8_t> bytes(t.data, t.data + t.num_bytes);
      if (t.name == "blk.1.attn_sinks.weight") {
        const float nan = NAN;
        std::memcpy(&bytes[3 * sizeof(float)], &nan, sizeof(float));
      }
      REQUIRE(w.AddTensor(t.name, t.type, t.dims, bytes).ok());
    }
    const std::string nan_sink = testing::ScratchDir() + "/nan_sink.gguf";
    REQUIRE(w.Write(nan_sink).ok());
    m = Model::Load(nan_sink);
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("blk.1.attn_sinks.weight holds a non-finite value"));
  }
  SECTION("inconsistent hyperparameters") {
    std::string path =
        WriteEditedModel([](GgufWriter& w) { w.SetUint32("llama.attention.head_count", 7); });
    auto m = Model::Load(path);
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("head count"));
  }
  SECTION("missing hyperparameter") {
    auto src = GgufFile::Open(testing::ModelPath("stories260K.gguf"));
    REQUIRE(src.ok());
    GgufWriter w;
    for (const auto& [key, value] : (*src)->metadata()) {
      if (key != "llama.block_count") w.Set(key, value);
    }
    std::string path = testing::ScratchDir() + "/nometa.gguf";
    REQUIRE(w.Write(path).ok());
    auto m = Model::Load(path);
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("llama.block_count"));
  }
  SECTION("not a model at all") {
    std::string path = testing::ScratchDir() + "/junk.gguf";
    testing::WriteFile(path, "this is not a gguf file");
    auto m = Model::Load(path);
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("magic"));
  }
  SECTION("missing file or directory") {
    CHECK(Model::Load("/nonexistent/model.gguf").status().code() == absl::StatusCode::kNotFound);
    std::string dir = testing::ScratchDir();
    auto m = Model::Load(dir);
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(std::string(m.status().message()), Catch::Contains("config.json"));
  }
  SECTION("vocab-only GGUF is not a model, but its tokenizer loads") {
    std::string vocab = testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf");
    CHECK_FALSE(Model::Load(vocab).ok());
    auto tok = LoadTokenizer(vocab);
    REQUIRE(tok.ok());
    CHECK((*tok)->vocab_size() == 32000);
  }
}

}  // namespace model_test
}  // namespace textgen
