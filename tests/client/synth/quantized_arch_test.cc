// Quantized weights in every architecture: a model textgen-synth-model writes in Q4_K_M (Q4_K
// and Q6_K rows, Phi-3's fused QKV and gate/up split as row views of quantized rows, Qwen2
// biases, q/k norms, Gemma's post norms) computes in exact mode what its dequantized F32 twin
// computes: the same greedy ids, logprobs within 1e-4.
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

    const nlohmann::json q = Run(path);
    const nlohmann::json f = Run(WriteF32Twin(path));
    CHECK(q["generated_ids"] == f["generated_ids"]);
    const auto& lq = q["logprobs"];
    const auto& lf = f["logprobs"];
    REQUIRE(lq.size() == lf.size());
    for (size_t i = 0; i < lq.size(); ++i) {
      CHECK(std::abs(lq[i].get<double>() - lf[i].get<double>()) < 1e-4);
    }
  }
}

}  // namespace quantized_arch_test
}  // namespace textgen
