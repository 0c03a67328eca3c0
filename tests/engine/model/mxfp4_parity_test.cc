// gpt-oss with MXFP4 experts against llama.cpp.
//
// The test writes the model itself: models/moe/gpt-oss.gguf quantized by FromF32 with
// llama-quantize's MXFP4_MOE rules (below), which must give llama-quantize's own tensor bytes:
// the checksum kLlamaQuantizeChecksum is that of `llama-quantize gpt-oss.gguf OUT MXFP4_MOE 2`'s
// output (tests/data/moe/gguf_checksum.c, which also prints each tensor's own checksum: the two
// files were compared tensor by tensor that way).
//
// References (tests/data/moe/, made by tests/data/moe/greedy_ref.cpp on libllama, 2 threads,
// F32 K/V cache, no flash attention; the 5 prompt_ids of reference/moe/gpt-oss.greedy.json, 64
// tokens each; the llama.cpp tree and commands are in each file's "made" / "files"):
//   gpt-oss-mxfp4.dequant.greedy.json  llama.cpp on the MXFP4 weights dequantized to F32 (the
//                                      exact computation): --compute f32 must match it token for
//                                      token, logprobs within 1e-3;
//   gpt-oss-mxfp4.greedy.json          llama.cpp on the MXFP4 file itself, which quantizes the
//                                      activations to Q8_0 for the MXFP4 and Q8_0 matmuls: it
//                                      leaves the exact run after 46, 63 and 46 tokens in three
//                                      cases. --compute bf16 (activations quantized as llama.cpp
//                                      does for these formats) is compared teacher-forced.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "engine/format/quantize.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/teacher_forced.h"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace mxfp4_parity_test {

// FNV-1a 64 over the tensors sorted by name (llama-quantize writes them in an order of its
// own), each as its name, a 0 byte, the ggml type id (4 bytes, little endian), its data bytes:
// llama-quantize's MXFP4_MOE output of models/moe/gpt-oss.gguf (tests/data/moe/gguf_checksum.c).
constexpr uint64_t kLlamaQuantizeChecksum = 0x231fec6829671fc6ull;

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void Mix(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// llama-quantize's MXFP4_MOE (llama-quant.cpp): only tensors of 2+ dimensions whose names end
// in "weight" are quantized, never norms or the router (ffn_gate_inp); those with more than
// one matrix (ne[2] > 1: the experts) become MXFP4, the others Q8_0 (output and token_embd
// included). Everything else (biases, sinks, norms, the router) stays F32.
DType Mxfp4MoeType(const GgufTensorInfo& t) {
  const bool quantize = t.dims.size() >= 2 && EndsWith(t.name, "weight") &&
                        t.name.find("_norm.weight") == std::string::npos &&
                        t.name.find("ffn_gate_inp.weight") == std::string::npos;
  if (!quantize) return t.type;
  return t.dims.size() >= 3 && t.dims[2] > 1 ? DType::kMXFP4 : DType::kQ8_0;
}

// Writes gpt-oss.gguf's MXFP4_MOE quantization; returns its path.
std::string WriteMxfp4Model() {
  auto src = GgufFile::Open(testing::ModelPath("moe/gpt-oss.gguf"));
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) w.Set(key, value);
  w.Set("general.file_type", GgufUint(GgufValueType::kUint32, 38));  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    REQUIRE(t.type == DType::kF32);
    const DType type = Mxfp4MoeType(t);
    std::vector<uint8_t> bytes(t.num_bytes);
    if (type == DType::kF32) {
      std::memcpy(bytes.data(), t.data, t.num_bytes);
    } else {
      const auto n = static_cast<size_t>(t.num_elements);
      const absl::StatusOr<size_t> size = RowBytes(type, t.num_elements);
      REQUIRE(size.ok());
      bytes.resize(*size);
      REQUIRE(FromF32(type, absl::MakeConstSpan(reinterpret_cast<const float*>(t.data), n),
                      absl::MakeSpan(bytes))
                  .ok());
    }
    REQUIRE(w.AddTensor(t.name, type, t.dims, bytes).ok());
  }
  const std::string path = testing::ScratchDir() + "/gpt-oss-mxfp4.gguf";
  REQUIRE(w.Write(path).ok());
  return path;
}

const std::string& Mxfp4ModelPath() {
  static const std::string path = WriteMxfp4Model();
  return path;
}

nlohmann::json Reference(const std::string& name) {
  return nlohmann::json::parse(testing::ReadFile(testing::SourceDir() + "/tests/data/moe/" + name));
}

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, KvType type) {
  return testing::MakeTestCache(c, {.type = type});
}

TEST_CASE("MXFP4_MOE written by FromF32 is llama-quantize's file, tensor for tensor",
          "[parity][moe][mxfp4]") {
  auto ours = GgufFile::Open(Mxfp4ModelPath());
  REQUIRE(ours.ok());
  std::vector<const GgufTensorInfo*> sorted;
  for (const GgufTensorInfo& t : (*ours)->tensors()) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->name < b->name; });
  Fnv fnv;
  int mxfp4 = 0, q8_0 = 0, f32 = 0;
  for (const GgufTensorInfo* p : sorted) {
    const GgufTensorInfo& t = *p;
    const uint32_t type = GgmlTypeOf(t.type);
    fnv.Mix(t.name.c_str(), t.name.size() + 1);
    fnv.Mix(&type, 4);
    fnv.Mix(t.data, t.num_bytes);
    mxfp4 += t.type == DType::kMXFP4;
    q8_0 += t.type == DType::kQ8_0;
    f32 += t.type == DType::kF32;
  }
  // llama-quantize's log: 6 experts MXFP4, 10 matrices Q8_0 (attention, token_embd, output),
  // 25 kept F32 (norms, biases, sinks, routers).
  CHECK(mxfp4 == 6);
  CHECK(q8_0 == 10);
  CHECK(f32 == 25);
  CHECK(fnv.h == kLlamaQuantizeChecksum);
}

TEST_CASE("gpt-oss with MXFP4 experts matches llama.cpp token for token with F32 compute",
          "[parity][moe][mxfp4]") {
  auto model = Model::Load(Mxfp4ModelPath());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config(), KvType::kF32);
  const testing::GreedyStats g =
      testing::FreeRunGreedy(m, *cache, Reference("gpt-oss-mxfp4.dequant.greedy.json"));
  WARN("gpt-oss MXFP4, f32: " << g.exact << "/" << g.tokens << " ids exact, max |logprob diff| "
                              << g.max_logprob_diff);
  CHECK(g.exact == g.tokens);
  CHECK(g.max_logprob_diff < 1e-3);
}

TEST_CASE("gpt-oss with MXFP4 experts stays close to llama.cpp's quantized run with BF16 compute",
          "[parity][moe][mxfp4]") {
  ModelOptions mo;
  mo.llama.linear.compute = ops::LinearCompute::kBf16;
  auto model = Model::Load(Mxfp4ModelPath(), mo);
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config(), KvType::kBf16);
  const testing::ForcedStats r =
      testing::TeacherForce(m, *cache, Reference("gpt-oss-mxfp4.greedy.json"));
  WARN("gpt-oss MXFP4, bf16, teacher-forced on llama.cpp's MXFP4 run: argmax equal at "
       << r.argmax_equal << " of " << r.tokens << " steps, max |logprob diff| " << r.max_diff
       << ", mean " << r.sum_diff / r.tokens);
  // Not exact: llama.cpp's run has its own activation rounding (Q8_0 blocks, ggml's order of
  // the block sums), this one BF16 as well (router, cache). Measured (AVX2 build): 318 of 320
  // argmax equal, max 0.163, mean 0.025; for scale, the exact path (--compute f32) against
  // the same reference gives 317, 0.171 and 0.022 (it is 320/320 within 1.1e-5 of the
  // dequantized twin's run), and the quant zoo's fast mode 0.51 and 0.066
  // (generation_parity_test.cc). A wrong MXFP4 block (scale off by 2, codes misread) moves
  // logprobs by far more than 1.
  CHECK(r.max_diff < 0.4);
  CHECK(r.sum_diff / r.tokens < 0.05);
  CHECK(r.argmax_equal >= r.tokens * 93 / 100);
}

}  // namespace mxfp4_parity_test
}  // namespace textgen
