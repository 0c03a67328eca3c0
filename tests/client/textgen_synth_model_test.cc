// End-to-end tests of the textgen-synth-model binary: the files it writes load, tokenize like
// the vocab file and generate; the types hold the same underlying values; bad flags exit 2.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace textgen_synth_model_test {

using testing::RunCommand;
using testing::ShellQuote;

std::string BinDir() {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  return bin_dir;
}

std::string VocabPath() { return testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf"); }

// Runs the tool with `args` (stderr merged into the output when asked).
testing::CommandResult Synth(const std::string& args, bool with_stderr = false) {
  return RunCommand(BinDir() + "/textgen-synth-model " + args +
                    (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

constexpr char kTinyShape[] =
    "--shape custom --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --ctx 128";

// Writes the tiny custom model of `type` with `seed` into a scratch folder; returns its path.
std::string WriteTiny(const std::string& type, int seed = 1) {
  const std::string path = testing::ScratchDir() + "/tiny-" + type + ".gguf";
  testing::CommandResult r =
      Synth(absl::StrCat(kTinyShape, " --type ", type, " --seed ", seed, " --vocab ",
                         ShellQuote(VocabPath()), " --out ", ShellQuote(path)));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith(path + ": shape custom, type " + type));
  return path;
}

// Parameters of a Llama with an untied output matrix, from its config.
int64_t ExpectedParams(const ModelConfig& c) {
  const int64_t d = c.n_embd, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t layer = 2 * d * d + 2 * d * kv + 3 * d * c.n_ff + 2 * d;
  return 2 * int64_t{c.n_vocab} * d + c.n_layers * layer + d;
}

TEST_CASE("textgen-synth-model writes tiny models that load, tokenize and generate", "[cli]") {
  auto vocab_tokenizer = LoadTokenizer(VocabPath());
  REQUIRE(vocab_tokenizer.ok());
  const std::vector<int32_t> want_ids = (*vocab_tokenizer)->Encode("Once upon a time", true);
  for (const auto& [type, dtype] :
       std::vector<std::pair<std::string, DType>>{{"f32", DType::kF32},
                                                  {"f16", DType::kF16},
                                                  {"bf16", DType::kBf16},
                                                  {"q8_0", DType::kQ8_0}}) {
    INFO("type " << type);
    const std::string path = WriteTiny(type);
    auto model = Model::Load(path);
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.name == "synthetic custom " + type);
    CHECK(c.n_vocab == 32000);
    CHECK(c.n_embd == 64);
    CHECK(c.n_layers == 2);
    CHECK(c.n_heads == 4);
    CHECK(c.n_kv_heads == 2);
    CHECK(c.head_dim == 16);
    CHECK(c.rope_dim == 16);
    CHECK(c.n_ff == 128);
    CHECK(c.n_ctx == 128);
    CHECK(c.rms_eps == 1e-5f);
    CHECK(c.rope_base == 10000.0f);
    CHECK(!c.tied_embeddings);
    CHECK(c.weight_type == dtype);
    CHECK((*model)->tokenizer().vocab_size() == 32000);
    CHECK((*model)->tokenizer().Encode("Once upon a time", true) == want_ids);

    testing::CommandResult run =
        RunCommand(BinDir() + "/textgen-run --model " + ShellQuote(path) +
                   " --prompt Hello --max-new-tokens 8 --json 2>/dev/null");
    REQUIRE(run.exit_code == 0);
    nlohmann::json j = nlohmann::json::parse(run.out);
    CHECK(j["model"] == "synthetic custom " + type);
    CHECK(!j["generated_ids"].empty());
    CHECK(j["generated_ids"].size() <= 8);
  }
}

TEST_CASE("textgen-synth-model types hold the same values for a seed", "[cli]") {
  auto f32 = GgufFile::Open(WriteTiny("f32"));
  REQUIRE(f32.ok());
  const std::vector<GgufTensorInfo>& tensors = (*f32)->tensors();
  REQUIRE(tensors.size() == 3 + 9 * 2);

  // The F32 values: mean 0, standard deviation 0.02, norms exactly 1.
  const GgufTensorInfo* embd = (*f32)->FindTensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->dims == std::vector<int64_t>{64, 32000});
  std::vector<float> e(embd->num_elements);
  ToF32(DType::kF32, embd->data, e.data(), embd->num_elements);
  double sum = 0, sum_sq = 0;
  for (float v : e) {
    sum += v;
    sum_sq += double{v} * v;
  }
  const double mean = sum / e.size(), stddev = std::sqrt(sum_sq / e.size() - mean * mean);
  CHECK(std::abs(mean) < 1e-4);
  CHECK(std::abs(stddev - 0.02) < 2e-4);
  const GgufTensorInfo* norm = (*f32)->FindTensor("blk.1.ffn_norm.weight");
  REQUIRE(norm != nullptr);
  REQUIRE(norm->type == DType::kF32);
  std::vector<float> ones(norm->num_elements);
  ToF32(DType::kF32, norm->data, ones.data(), norm->num_elements);
  CHECK(ones == std::vector<float>(64, 1.0f));

  for (const auto& [type, dtype] : std::vector<std::pair<std::string, DType>>{
           {"f16", DType::kF16}, {"bf16", DType::kBf16}, {"q8_0", DType::kQ8_0}}) {
    INFO("type " << type);
    auto other = GgufFile::Open(WriteTiny(type));
    REQUIRE(other.ok());
    REQUIRE((*other)->tensors().size() == tensors.size());
    for (const GgufTensorInfo& t : tensors) {
      INFO("tensor " << t.name);
      const GgufTensorInfo* o = (*other)->FindTensor(t.name);
      REQUIRE(o != nullptr);
      CHECK(o->dims == t.dims);
      const bool is_norm = t.dims.size() == 1;
      CHECK(o->type == (is_norm ? DType::kF32 : dtype));
      std::vector<float> x(t.num_elements), y(t.num_elements);
      ToF32(DType::kF32, t.data, x.data(), t.num_elements);
      ToF32(o->type, o->data, y.data(), t.num_elements);
      if (is_norm) {
        CHECK(x == y);
        continue;
      }
      int bad = 0;
      for (int64_t b = 0; b < t.num_elements / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
        for (int i = 0; i < 32; ++i) {
          const float v = x[b * 32 + i], err = std::fabs(v - y[b * 32 + i]);
          // Q8_0: half a step of amax / 127 (+ the F16 scale's rounding); F16 and BF16: half
          // an ulp (F16 subnormals below 2^-14 have an absolute ulp of 2^-24).
          const float bound = type == "q8_0"  ? amax / 127 * 0.57f
                              : type == "f16" ? std::max(std::fabs(v) * 0x1p-11f, 0x1p-25f)
                                              : std::fabs(v) * 0x1p-8f;
          if (err > bound) ++bad;
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("textgen-synth-model is deterministic in its seed", "[cli]") {
  const std::string a = testing::ReadFile(WriteTiny("q8_0", 7));
  const std::string b = testing::ReadFile(WriteTiny("q8_0", 7));
  const std::string c = testing::ReadFile(WriteTiny("q8_0", 8));
  CHECK(a == b);
  REQUIRE(a.size() == c.size());  // same layout, different weights
  CHECK(a != c);
}

TEST_CASE("textgen-synth-model writes stories15M that loads", "[cli]") {
  for (const std::string type : {"f32", "q8_0"}) {
    INFO("type " << type);
    const std::string path = testing::ScratchDir() + "/stories15M-" + type + ".gguf";
    testing::CommandResult r = Synth("--shape stories15M --type " + type + " --vocab " +
                                     ShellQuote(VocabPath()) + " --out " + ShellQuote(path));
    REQUIRE(r.exit_code == 0);
    auto model = Model::Load(path);
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.name == "synthetic stories15M " + type);
    CHECK(c.n_embd == 288);
    CHECK(c.n_layers == 6);
    CHECK(c.n_heads == 6);
    CHECK(c.n_kv_heads == 6);
    CHECK(c.n_ff == 768);
    CHECK(c.n_ctx == 256);
    CHECK(c.n_vocab == 32000);
    // The summary line: path, shape, type, parameters, bytes, seconds.
    const std::string params = std::to_string(ExpectedParams(c));
    const std::string bytes = std::to_string(std::filesystem::file_size(path));
    CHECK_THAT(r.out, Catch::StartsWith(path + ": shape stories15M, type " + type + ", " + params +
                                        " parameters, " + bytes + " bytes, "));
    CHECK_THAT(r.out, Catch::EndsWith(" s\n"));
  }
}

TEST_CASE("textgen-synth-model --layers writes a named shape at reduced depth", "[cli]") {
  const std::string path = testing::ScratchDir() + "/stories15M-2l.gguf";
  testing::CommandResult r = Synth("--shape stories15M --layers 2 --type f32 --vocab " +
                                   ShellQuote(VocabPath()) + " --out " + ShellQuote(path));
  REQUIRE(r.exit_code == 0);
  auto model = Model::Load(path);
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  CHECK(c.n_layers == 2);
  CHECK(c.n_embd == 288);  // the per-layer shape of stories15M
  CHECK(c.n_ff == 768);
  CHECK(c.name == "synthetic stories15M-2l f32");
}

// Tensor names each architecture's GGUF must hold (llama.cpp's names), beside the llama ones.
struct ArchLayout {
  std::string arch;
  std::vector<std::string> present, absent;
  std::string flags;  // beside the shape's
};

TEST_CASE("textgen-synth-model writes each architecture's layout, which loads and generates",
          "[cli]") {
  const std::vector<ArchLayout> layouts = {
      {"qwen2", {"blk.0.attn_q.bias", "blk.1.attn_v.bias", "output.weight"}, {"attn_q_norm"}},
      {"qwen3", {"blk.0.attn_q_norm.weight", "blk.1.attn_k_norm.weight"}, {"blk.0.attn_q.bias"}},
      {"phi3", {"blk.0.attn_qkv.weight"}, {"blk.0.attn_q.weight", "blk.0.ffn_gate.weight"}},
      {"gemma3",
       {"blk.0.post_attention_norm.weight", "blk.5.post_ffw_norm.weight",
        "blk.0.attn_q_norm.weight"},
       {"blk.0.attn_q.bias"}},
      {"qwen3moe",
       {"blk.0.attn_q_norm.weight", "blk.0.ffn_gate_inp.weight", "blk.5.ffn_down_exps.weight"},
       {"blk.0.ffn_gate.weight", "blk.0.ffn_down.weight"},
       " --experts 4 --experts-used 2 --expert-ffn 64"},
      {"llama",
       {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.weight"},
       {"blk.0.ffn_up.weight", "attn_q_norm"},
       " --experts 4 --experts-used 2"},
  };
  for (const ArchLayout& layout : layouts) {
    INFO("arch " << layout.arch);
    const std::string path = testing::ScratchDir() + "/tiny-" + layout.arch + ".gguf";
    testing::CommandResult r =
        Synth(absl::StrCat("--shape custom --arch ", layout.arch,
                           " --dim 64 --layers 6 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128",
                           " --ctx 256 --type q8_0 --vocab ", ShellQuote(VocabPath()), " --out ",
                           ShellQuote(path), layout.flags),
              /*with_stderr=*/true);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);
    auto gguf = GgufFile::Open(path);
    REQUIRE(gguf.ok());
    const GgufValue* arch = (*gguf)->Find("general.architecture");
    REQUIRE(arch != nullptr);
    CHECK(std::get<std::string>(arch->scalar) == layout.arch);
    for (const std::string& name : layout.present) CHECK((*gguf)->FindTensor(name) != nullptr);
    for (const GgufTensorInfo& t : (*gguf)->tensors()) {
      for (const std::string& name : layout.absent) {
        CHECK_THAT(t.name, !Catch::Contains(name));
      }
    }
    if (layout.arch == "qwen3moe") {
      // llama.cpp's expert stacks: ne = {n_embd, width, n_expert}, the router F32.
      const GgufTensorInfo* gate = (*gguf)->FindTensor("blk.0.ffn_gate_exps.weight");
      REQUIRE(gate != nullptr);
      CHECK(gate->dims == std::vector<int64_t>{64, 64, 4});
      const GgufTensorInfo* down = (*gguf)->FindTensor("blk.0.ffn_down_exps.weight");
      REQUIRE(down != nullptr);
      CHECK(down->dims == std::vector<int64_t>{64, 64, 4});
      const GgufTensorInfo* router = (*gguf)->FindTensor("blk.0.ffn_gate_inp.weight");
      REQUIRE(router != nullptr);
      CHECK(router->type == DType::kF32);
    }
    if (layout.arch == "phi3") {
      const GgufTensorInfo* qkv = (*gguf)->FindTensor("blk.0.attn_qkv.weight");
      REQUIRE(qkv != nullptr);
      CHECK(qkv->dims == std::vector<int64_t>{64, 4 * 32 + 2 * 2 * 32});
      const GgufTensorInfo* up = (*gguf)->FindTensor("blk.0.ffn_up.weight");
      REQUIRE(up != nullptr);
      CHECK(up->dims == std::vector<int64_t>{64, 2 * 128});
      CHECK((*gguf)->FindTensor("rope_factors_long.weight") == nullptr);  // custom: no longrope
    }

    auto model = Model::Load(path);
    INFO((model.ok() ? std::string("loaded") : std::string(model.status().message())));
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.architecture == layout.arch);
    CHECK(c.head_dim == 32);
    CHECK(c.n_layers == 6);
    CHECK(c.moe.n_expert == (layout.flags.empty() ? 0 : 4));
    testing::CommandResult run =
        RunCommand(BinDir() + "/textgen-run --model " + ShellQuote(path) +
                   " --prompt Hello --max-new-tokens 4 --json 2>/dev/null");
    REQUIRE(run.exit_code == 0);
    CHECK(!nlohmann::json::parse(run.out)["generated_ids"].empty());
  }
}

TEST_CASE("textgen-synth-model names the bad flag and exits 2", "[cli]") {
  const std::string bad_path = testing::ScratchDir() + "/bad.gguf";
  const std::string out = " --out " + ShellQuote(bad_path);
  const std::string vocab = " --vocab " + ShellQuote(VocabPath());
  const std::string custom = " --shape custom --type f32" + vocab + out;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "--shape"},
      {"--shape stories15M --type f32" + vocab, "--out"},
      {"--shape stories15M" + vocab + out, "--type"},
      {"--shape stories99M --type f32" + vocab + out, "--shape"},
      {"--shape stories15M --type f8" + vocab + out, "--type"},
      {"--shape stories15M --type f32 --seed x" + vocab + out, "--seed"},
      {"--shape stories15M --type f32 --dim 64" + vocab + out, "--dim"},
      {"--shape stories15M --type f32 --frobnicate" + vocab + out, "--frobnicate"},
      {"--shape stories15M --type f32 --out", "--out"},
      {"--shape stories15M --type f32 --vocab /nonexistent.gguf" + out, "--vocab"},
      {"--shape stories15M --type f32 --vocab /dev/null" + out, "--vocab"},
      {custom + " --layers 2 --heads 4 --ffn 128", "--dim"},
      {custom + " --dim 64 --heads 4 --ffn 128", "--layers"},
      {custom + " --dim 64 --layers 2 --ffn 128", "--heads"},
      {custom + " --dim 64 --layers 2 --heads 4", "--ffn"},
      {custom + " --dim 0 --layers 2 --heads 4 --ffn 128", "--dim"},
      {custom + " --dim 64 --layers 2 --heads 5 --ffn 128", "--heads"},
      {custom + " --dim 64 --layers 2 --heads 4 --kv-heads 3 --ffn 128", "--kv-heads"},
      {custom + " --dim 64 --layers 2 --heads 64 --ffn 128", "--heads"},  // head size 1
      {custom + " --dim 64 --layers 2 --heads 4 --ffn 128 --ctx -1", "--ctx"},
      {" --shape custom --type q8_0 --dim 48 --layers 2 --heads 4 --ffn 128" + vocab + out,
       "--dim"},
      {custom + " --arch mamba --dim 64 --layers 2 --heads 4 --ffn 128", "--arch"},
      {"--shape qwen3-0.6b --arch qwen3 --type f32" + vocab + out, "--arch"},
      {"--shape qwen3-0.6b --experts 8 --type f32" + vocab + out, "--experts"},
      {custom + " --dim 64 --layers 2 --heads 4 --ffn 128 --experts 4", "--experts-used"},
      {custom + " --dim 64 --layers 2 --heads 4 --ffn 128 --experts 4 --experts-used 5",
       "--experts-used"},
      {custom + " --arch qwen3moe --dim 64 --layers 2 --heads 4 --ffn 128", "--experts"},
      {custom + " --arch phi3 --dim 64 --layers 2 --heads 4 --ffn 128 --experts 4 --experts-used 2",
       "--experts"},
      {" --shape custom --type q8_0 --dim 64 --layers 2 --heads 4 --ffn 128 --experts 4"
       " --experts-used 2 --expert-ffn 48" +
           vocab + out,
       "--expert-ffn"},
      {custom + " --dim 64 --layers 2 --heads 4 --head-dim 15 --ffn 128", "--heads"},
      {" --shape custom --type q8_0 --dim 64 --layers 2 --heads 4 --head-dim 20 --ffn 128" + vocab +
           out,
       "--heads"},
      {" --shape custom --type q8_0 --dim 64 --layers 2 --heads 4 --ffn 100" + vocab + out,
       "--ffn"},
  };
  for (const auto& [args, flag] : cases) {
    INFO("args: " << args);
    testing::CommandResult r = Synth(args, /*with_stderr=*/true);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(flag));
  }
  CHECK(!std::filesystem::exists(bad_path));

  // An unwritable output is not a flag error: exit 1, naming the file.
  testing::CommandResult r =
      Synth("--shape custom --type f32 --dim 64 --layers 1 --heads 4 --ffn 128" + vocab +
                " --out /nonexistent-dir/x.gguf",
            /*with_stderr=*/true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("/nonexistent-dir/x.gguf"));
  CHECK(Synth("--help").exit_code == 0);
}

}  // namespace textgen_synth_model_test
}  // namespace textgen
