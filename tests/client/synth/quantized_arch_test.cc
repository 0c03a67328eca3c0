// Quantized weights in every architecture: a model textgen-synth-model writes in Q4_K_M (Q4_K
// and Q6_K rows, Phi-3's fused QKV and gate/up split as row views of quantized rows, Qwen2
// biases, q/k norms, Gemma's post norms), or gpt-oss in MXFP4_MOE (MXFP4 experts, Q8_0 rest),
// computes in exact mode what its dequantized F32 twin computes: the same greedy ids, logprobs
// within 1e-4.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace quantized_arch_test {

using testing::RunCommand;
using testing::ShellQuote;

std::string Bin(const std::string& name) {
  const char* dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(dir != nullptr);
  return std::string(dir) + "/" + name;
}

// A copy of `src` with every tensor widened to F32 by ToF32 (the reference dequantizers).
std::string WriteF32Twin(const std::string& src) {
  auto gguf = GgufFile::Open(src);
  REQUIRE(gguf.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*gguf)->metadata()) w.Set(key, value);
  std::vector<std::vector<float>> keep;  // the writer borrows the bytes until Write
  for (const GgufTensorInfo& t : (*gguf)->tensors()) {
    keep.emplace_back(t.num_elements);
    ToF32(t.type, t.data, keep.back().data(), t.num_elements);
    const auto* bytes = reinterpret_cast<const uint8_t*>(keep.back().data());
    REQUIRE(w.AddTensor(t.name, DType::kF32, t.dims,
                        absl::MakeConstSpan(bytes, keep.back().size() * sizeof(float)))
                .ok());
  }
  const std::string out = src + ".f32.gguf";
  REQUIRE(w.Write(out).ok());
  return out;
}

nlohmann::json Run(const std::string& model) {
  testing::CommandResult r = RunCommand(
      Bin("textgen-run") + " --model " + ShellQuote(model) +
      " --prompt-ids 1,450,4996,17354,1701 --max-new-tokens 12 --ignore-eos --compute f32 --json" +
      " 2>/dev/null");
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

// The model at `path` and its dequantized F32 twin generate the same ids with logprobs within
// 1e-4 (weights dequantized exactly, F32 compute in both). Returns the number of ids.
size_t CheckSameAsF32Twin(const std::string& path) {
  const nlohmann::json q = Run(path);
  const nlohmann::json f = Run(WriteF32Twin(path));
  CHECK(q["generated_ids"] == f["generated_ids"]);
  const auto& lq = q["logprobs"];
  const auto& lf = f["logprobs"];
  REQUIRE(lq.size() == lf.size());
  for (size_t i = 0; i < lq.size(); ++i) {
    CHECK(std::abs(lq[i].get<double>() - lf[i].get<double>()) < 1e-4);
  }
  return q["generated_ids"].size();
}

TEST_CASE("quantized models of every architecture compute what their dequantized twins do",
          "[cli][quant]") {
  for (const std::string arch : {"llama", "qwen2", "qwen3", "phi3", "gemma3"}) {
    INFO("arch " << arch);
    const std::string path = testing::ScratchDir() + "/" + arch + "-q4_k_m.gguf";
    testing::CommandResult w = RunCommand(
        Bin("textgen-synth-model") + " --shape custom --arch " + arch +
        " --dim 256 --layers 6 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 --ctx 256" +
        " --type q4_k_m --vocab " +
        ShellQuote(testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf")) + " --out " +
        ShellQuote(path) + " 2>&1");
    INFO(w.out);
    REQUIRE(w.exit_code == 0);
    auto gguf = GgufFile::Open(path);
    REQUIRE(gguf.ok());
    int quantized = 0;
    for (const GgufTensorInfo& t : (*gguf)->tensors()) {
      if (t.type == DType::kQ4_K || t.type == DType::kQ6_K) ++quantized;
    }
    CHECK(quantized >= 6 * 4);  // every layer's matrices are K-quants

    CheckSameAsF32Twin(path);
  }
}

// The command writing a reduced gpt-oss (custom shape) with the Llama 2 vocab; `extra` flags.
std::string GptOssCommand(const std::string& path, const std::string& extra) {
  return Bin("textgen-synth-model") +
         " --shape custom --arch gpt-oss --dim 128 --layers 2 --heads 4 --kv-heads 2" +
         " --head-dim 32 --ffn 256 --experts 4 --experts-used 2 --ctx 4096 --vocab " +
         ShellQuote(testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf")) + " --out " +
         ShellQuote(path) + " " + extra + " 2>&1";
}

TEST_CASE("gpt-oss in mxfp4_moe: MXFP4 experts, Q8_0 matrices, padded vocab, exact twin",
          "[cli][quant]") {
  const std::string path = testing::ScratchDir() + "/gpt-oss-mxfp4_moe.gguf";
  testing::CommandResult w = RunCommand(GptOssCommand(path, "--type mxfp4_moe --vocab-size 32768"));
  INFO(w.out);
  REQUIRE(w.exit_code == 0);
  auto gguf = GgufFile::Open(path);
  REQUIRE(gguf.ok());
  int mxfp4 = 0, q8 = 0;
  for (const GgufTensorInfo& t : (*gguf)->tensors()) {
    INFO(t.name);
    const bool stack = t.name.find("_exps.weight") != std::string::npos;
    if (stack) {
      CHECK(t.type == DType::kMXFP4);
      CHECK(t.dims.size() == 3);
      ++mxfp4;
    } else if (t.dims.size() == 2 && t.name.ends_with(".weight") &&
               t.name.find("ffn_gate_inp") == std::string::npos) {
      CHECK(t.type == DType::kQ8_0);  // token_embd, output, attention
      ++q8;
    } else {
      CHECK(t.type == DType::kF32);  // norms, biases, sinks, routers
    }
  }
  CHECK(mxfp4 == 2 * 3);
  CHECK(q8 == 2 + 2 * 4);
  const GgufValue* ftype = (*gguf)->Find("general.file_type");
  REQUIRE(ftype != nullptr);
  CHECK(std::get<uint64_t>(ftype->scalar) == 38);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE

  // The Llama 2 vocab's 32,000 tokens padded with unused ones to 32,768, like the matrices.
  const GgufValue* tokens = (*gguf)->Find("tokenizer.ggml.tokens");
  const GgufValue* types = (*gguf)->Find("tokenizer.ggml.token_type");
  const GgufValue* scores = (*gguf)->Find("tokenizer.ggml.scores");
  REQUIRE((tokens != nullptr && types != nullptr && scores != nullptr));
  REQUIRE(tokens->array.size() == 32768);
  CHECK(types->array.size() == 32768);
  CHECK(scores->array.size() == 32768);
  CHECK(std::get<std::string>(tokens->array.back().scalar) == "[PAD32767]");
  CHECK(std::get<int64_t>(types->array[32000].scalar) == 5);
  CHECK((*gguf)->FindTensor("output.weight")->dims == std::vector<int64_t>{128, 32768});

  CHECK(CheckSameAsF32Twin(path) == 12);
}

TEST_CASE(
    "textgen-synth-model rejects a vocab size below the tokenizer's and gpt-oss without "
    "experts",
    "[cli][quant]") {
  const std::string path = testing::ScratchDir() + "/gpt-oss-bad.gguf";
  testing::CommandResult small =
      RunCommand(GptOssCommand(path, "--type mxfp4_moe --vocab-size 1000"));
  CHECK(small.exit_code == 2);
  CHECK_THAT(small.out, Catch::Contains("--vocab-size: 1000 is below the 32000 tokens"));
  testing::CommandResult dense = RunCommand(
      Bin("textgen-synth-model") + " --shape custom --arch gpt-oss --dim 128 --layers 1" +
      " --heads 4 --ffn 256 --type f32 --out " + ShellQuote(path) + " 2>&1");
  CHECK(dense.exit_code == 2);
  CHECK_THAT(dense.out, Catch::Contains("--experts: gpt-oss needs experts"));
  testing::CommandResult named = RunCommand(Bin("textgen-synth-model") +
                                            " --shape gpt-oss-20b --vocab-size 250000 --type "
                                            "f32 --out " +
                                            ShellQuote(path) + " 2>&1");
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.out, Catch::Contains("--vocab-size: only with --shape custom"));
}

}  // namespace quantized_arch_test
}  // namespace textgen
