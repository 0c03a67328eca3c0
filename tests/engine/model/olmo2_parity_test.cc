// OLMo 2 (GGUF architecture `olmo2`) against llama.cpp.
//
// No OLMo 2 checkpoint is small enough for the tests, so the test writes one from the real
// TinyStories-656K weights (WriteOlmo2Model): OLMo 2 has no pre-norms, RMS-normalizes the whole
// q and k projections before RoPE, and normalizes each block's output before the residual add.
// The Llama pre-norm gains are folded into the next matmul's columns, divided by the median
// RMS of that matmul's input in the original model (kCalibration), and the new norms carry the
// median RMS of what they replace, so the result stays close to the trained function: its
// greedy outputs are TinyStories text with the base model's top-1/top-2 gaps (median 0.67,
// smallest 0.0047 over the 320 reference steps) rather than a flat or degenerate distribution.
//
// Reference: tests/data/olmo2/olmo2.greedy.json, llama.cpp on that file (tests/data/olmo2/
// README.md); kTensorChecksum pins the tensors it was made from.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/teacher_forced.h"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace olmo2_parity_test {

// FNV-1a 64 over the tensors sorted by name, each as its name, a 0 byte, the ggml type id (4
// bytes, little endian) and its data (tests/data/moe/gguf_checksum.c) of the file the reference
// was made from.
constexpr uint64_t kTensorChecksum = 0xf7443b48190748f9ull;

// TinyStories-656K's shape.
constexpr int kEmbd = 128, kHeads = 8, kKvHeads = 4, kHeadDim = 16, kFf = 384, kLayers = 2;

// Per layer, medians over the reference prompts and the base model's greedy continuations
// (tests/data/olmo2/calibrate.cpp, a float64 Llama forward pass of TinyStories-656K), rounded:
// RMS of the residual stream entering the attention and the FFN, RMS of Llama's q and k (after
// its pre-norm), RMS of the attention and FFN block outputs.
struct LayerScales {
  float x_attn, x_ffn, q, k, attn_out, ffn_out;
};
constexpr LayerScales kCalibration[kLayers] = {{0.48f, 3.2f, 1.07f, 1.23f, 3.1f, 14.5f},
                                               {15.1f, 19.9f, 1.5f, 2.49f, 9.45f, 15.6f}};

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void Mix(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
};

struct Tensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length
  std::vector<float> data;
};

std::vector<float> Floats(const GgufFile& f, const std::string& name) {
  const GgufTensorInfo* t = f.FindTensor(name);
  REQUIRE(t != nullptr);
  REQUIRE(t->type == DType::kF32);
  std::vector<float> out(t->num_elements);
  std::memcpy(out.data(), t->data, t->num_bytes);
  return out;
}

// q/k rows from GGUF Llama order (RoPE pairs (2i, 2i+1) of each head, convert_hf_to_gguf's
// permute) back to Hugging Face order (pairs (i, i + head_dim/2)), which NEOX RoPE expects.
std::vector<float> RotateHalfRows(const std::vector<float>& w, int heads) {
  std::vector<float> out(w.size());
  for (int h = 0; h < heads; ++h) {
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < kHeadDim / 2; ++i) {
        const int to = h * kHeadDim + half * kHeadDim / 2 + i, from = h * kHeadDim + 2 * i + half;
        std::memcpy(&out[to * kEmbd], &w[from * kEmbd], kEmbd * sizeof(float));
      }
    }
  }
  return out;
}

// w [rows, kEmbd] times diag(g / divisor) on the right: a norm gain moved into the matmul.
void ScaleColumns(std::vector<float>& w, const std::vector<float>& g, float divisor) {
  for (size_t r = 0; r < w.size() / kEmbd; ++r) {
    for (int c = 0; c < kEmbd; ++c) w[r * kEmbd + c] *= g[c] / divisor;
  }
}

// n norm weights around `scale`, +-20%, all different for n <= 128 (37 is prime to 128), so
// that a weight applied to the wrong element changes the result. Plain float arithmetic: the
// same bits on every machine.
std::vector<float> Ramp(int n, float scale, int salt) {
  const float amp = 0.2f;
  std::vector<float> w(n);
  for (int i = 0; i < n; ++i) {
    w[i] = scale * (1.0f - amp + 2 * amp * static_cast<float>((i * 37 + salt * 11) % 128) / 127.0f);
  }
  return w;
}

// The OLMo 2 model's tensors, in file order.
std::vector<Tensor> Olmo2Tensors(const GgufFile& src) {
  std::vector<Tensor> t;
  const std::vector<float> embd = Floats(src, "token_embd.weight");
  t.push_back({"token_embd.weight", {kEmbd, 2048}, embd});
  t.push_back({"output_norm.weight", {kEmbd}, Floats(src, "output_norm.weight")});
  // llama.cpp's olmo2 loader requires output.weight: the tied matrix, stored twice.
  t.push_back({"output.weight", {kEmbd, 2048}, embd});
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const LayerScales& s = kCalibration[l];
    const std::vector<float> attn_norm = Floats(src, b + "attn_norm.weight");
    const std::vector<float> ffn_norm = Floats(src, b + "ffn_norm.weight");
    std::vector<float> q = RotateHalfRows(Floats(src, b + "attn_q.weight"), kHeads);
    std::vector<float> k = RotateHalfRows(Floats(src, b + "attn_k.weight"), kKvHeads);
    std::vector<float> v = Floats(src, b + "attn_v.weight");
    std::vector<float> gate = Floats(src, b + "ffn_gate.weight");
    std::vector<float> up = Floats(src, b + "ffn_up.weight");
    for (std::vector<float>* w : {&q, &k, &v}) ScaleColumns(*w, attn_norm, s.x_attn);
    for (std::vector<float>* w : {&gate, &up}) ScaleColumns(*w, ffn_norm, s.x_ffn);
    const int q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
    t.push_back({b + "attn_q.weight", {kEmbd, q_dim}, q});
    t.push_back({b + "attn_k.weight", {kEmbd, kv_dim}, k});
    t.push_back({b + "attn_v.weight", {kEmbd, kv_dim}, v});
    t.push_back({b + "attn_output.weight", {q_dim, kEmbd}, Floats(src, b + "attn_output.weight")});
    t.push_back({b + "attn_q_norm.weight", {q_dim}, Ramp(q_dim, s.q, 4 * l)});
    t.push_back({b + "attn_k_norm.weight", {kv_dim}, Ramp(kv_dim, s.k, 4 * l + 1)});
    t.push_back({b + "post_attention_norm.weight", {kEmbd}, Ramp(kEmbd, s.attn_out, 4 * l + 2)});
    t.push_back({b + "ffn_gate.weight", {kEmbd, kFf}, gate});
    t.push_back({b + "ffn_up.weight", {kEmbd, kFf}, up});
    t.push_back({b + "ffn_down.weight", {kFf, kEmbd}, Floats(src, b + "ffn_down.weight")});
    t.push_back({b + "post_ffw_norm.weight", {kEmbd}, Ramp(kEmbd, s.ffn_out, 4 * l + 3)});
  }
  return t;
}

// Writes the OLMo 2 model to `path`; `edit` may change its tensors and metadata first (the
// load-error tests).
void WriteOlmo2Model(const std::string& path,
                     const std::function<void(std::vector<Tensor>&, GgufWriter&)>& edit = {}) {
  auto src = GgufFile::Open(testing::ModelPath("TinyStories-656K-F32.gguf"));
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (key.rfind("llama.", 0) == 0) {
      w.Set("olmo2." + key.substr(6), value);
    } else {
      w.Set(key, value);
    }
  }
  w.SetString("general.architecture", "olmo2");
  w.SetString("general.name", "TinyStories-656K as OLMo 2 (textgen test model)");
  std::vector<Tensor> tensors = Olmo2Tensors(**src);
  if (edit) edit(tensors, w);
  for (const Tensor& t : tensors) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(t.data.data());
    REQUIRE(w.AddTensor(t.name, DType::kF32, t.dims,
                        absl::MakeConstSpan(bytes, t.data.size() * sizeof(float)))
                .ok());
  }
  REQUIRE(w.Write(path).ok());
}

const std::string& Olmo2ModelPath() {
  static const std::string path = [] {
    const std::string p = testing::ScratchDir() + "/olmo2.gguf";
    WriteOlmo2Model(p);
    return p;
  }();
  return path;
}

uint64_t TensorChecksum(const GgufFile& f) {
  std::vector<const GgufTensorInfo*> sorted;
  for (const GgufTensorInfo& t : f.tensors()) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->name < b->name; });
  Fnv fnv;
  for (const GgufTensorInfo* t : sorted) {
    const uint32_t type = GgmlTypeOf(t->type);
    fnv.Mix(t->name.c_str(), t->name.size() + 1);
    fnv.Mix(&type, 4);
    fnv.Mix(t->data, t->num_bytes);
  }
  return fnv.h;
}

TEST_CASE("the OLMo 2 test model has the tensors llama.cpp's reference was made from",
          "[parity][olmo2]") {
  auto f = GgufFile::Open(Olmo2ModelPath());
  REQUIRE(f.ok());
  CHECK((*f)->tensors().size() == 3 + 11 * kLayers);
  CHECK(TensorChecksum(**f) == kTensorChecksum);
}

nlohmann::json Reference() {
  return nlohmann::json::parse(
      testing::ReadFile(testing::SourceDir() + "/tests/data/olmo2/olmo2.greedy.json"));
}

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, KvType type) {
  return testing::MakeTestCache(c, {.type = type});
}

TEST_CASE("OLMo 2 matches llama.cpp token for token with F32 compute", "[parity][olmo2]") {
  auto model = Model::Load(Olmo2ModelPath());
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  CHECK(m.config().architecture == "olmo2");
  auto cache = MakeCache(m.config(), KvType::kF32);
  const testing::GreedyStats g = testing::FreeRunGreedy(m, *cache, Reference());
  WARN("olmo2, f32: " << g.exact << "/" << g.tokens << " ids exact, max |logprob diff| "
                      << g.max_logprob_diff);
  CHECK(g.tokens == 320);
  CHECK(g.exact == g.tokens);
  CHECK(g.max_logprob_diff < 1e-3);
}

TEST_CASE("OLMo 2 stays close to llama.cpp with BF16 compute and a BF16 cache", "[parity][olmo2]") {
  ModelOptions mo;
  mo.llama.linear.compute = ops::LinearCompute::kBf16;
  auto model = Model::Load(Olmo2ModelPath(), mo);
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config(), KvType::kBf16);
  const testing::ForcedStats r = testing::TeacherForce(m, *cache, Reference());
  WARN("olmo2, bf16, teacher-forced: argmax equal at "
       << r.argmax_equal << " of " << r.tokens << " steps, max |logprob diff| " << r.max_diff
       << ", mean " << r.sum_diff / r.tokens);
  // The bounds of arch_parity_test.cc's BF16 check.
  CHECK(r.max_diff < 0.15);
  CHECK(r.argmax_equal >= r.tokens * 9 / 10);
}

// The same model as a Hugging Face directory (transformers' Olmo2ForCausalLM names; NEOX RoPE,
// so q/k rows as in the GGUF), with TinyStories-656K's tokenizer files.
std::string WriteOlmo2HfDir(const ModelConfig& c) {
  auto src = GgufFile::Open(testing::ModelPath("TinyStories-656K-F32.gguf"));
  REQUIRE(src.ok());
  const std::string dir = testing::ScratchDir();
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const Tensor& t : Olmo2Tensors(**src)) {
    std::string name;
    if (t.name == "token_embd.weight") {
      name = "model.embed_tokens.weight";
    } else if (t.name == "output_norm.weight") {
      name = "model.norm.weight";
    } else if (t.name == "output.weight") {
      name = "lm_head.weight";
    } else {
      const size_t dot = t.name.find('.', 4);  // after "blk.N"
      const std::string layer = t.name.substr(4, dot - 4), rest = t.name.substr(dot + 1);
      const std::map<std::string, std::string> hf = {
          {"attn_q.weight", "self_attn.q_proj.weight"},
          {"attn_k.weight", "self_attn.k_proj.weight"},
          {"attn_v.weight", "self_attn.v_proj.weight"},
          {"attn_output.weight", "self_attn.o_proj.weight"},
          {"attn_q_norm.weight", "self_attn.q_norm.weight"},
          {"attn_k_norm.weight", "self_attn.k_norm.weight"},
          {"post_attention_norm.weight", "post_attention_layernorm.weight"},
          {"ffn_gate.weight", "mlp.gate_proj.weight"},
          {"ffn_up.weight", "mlp.up_proj.weight"},
          {"ffn_down.weight", "mlp.down_proj.weight"},
          {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}};
      REQUIRE(hf.count(rest) == 1);
      name = "model.layers." + layer + "." + hf.at(rest);
    }
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
    header[name] = {{"dtype", "F32"},
                    {"shape", std::vector<int64_t>(t.dims.rbegin(), t.dims.rend())},
                    {"data_offsets", {begin, data.size()}}};
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  testing::WriteFile(dir + "/model.safetensors",
                     std::string(reinterpret_cast<const char*>(&n), 8) + h + data);
  const nlohmann::json config = {{"model_type", "olmo2"},
                                 {"architectures", {"Olmo2ForCausalLM"}},
                                 {"vocab_size", c.n_vocab},
                                 {"hidden_size", c.n_embd},
                                 {"intermediate_size", c.n_ff},
                                 {"num_hidden_layers", c.n_layers},
                                 {"num_attention_heads", c.n_heads},
                                 {"num_key_value_heads", c.n_kv_heads},
                                 {"max_position_embeddings", c.n_ctx},
                                 {"rope_theta", c.rope_base},
                                 {"rms_norm_eps", c.rms_eps},
                                 {"tie_word_embeddings", false}};
  testing::WriteFile(dir + "/config.json", config.dump());
  const std::string tok = testing::ModelPath("tinystories-656k-hf");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    testing::WriteFile(dir + "/" + f, testing::ReadFile(tok + "/" + f));
  }
  return dir;
}

TEST_CASE("OLMo 2 from a Hugging Face directory computes what the GGUF does", "[olmo2]") {
  auto gguf = Model::Load(Olmo2ModelPath());
  REQUIRE(gguf.ok());
  auto hf = Model::Load(WriteOlmo2HfDir((*gguf)->config()));
  INFO(hf.status().ToString());
  REQUIRE(hf.ok());
  CHECK((*hf)->config().architecture == "olmo2");
  const std::vector<int32_t> tokens = {1, 80, 147, 201, 282, 57};
  std::vector<float> a, b;
  auto ca = MakeCache((*gguf)->config(), KvType::kF32);
  auto cb = MakeCache((*hf)->config(), KvType::kF32);
  BlockTable ta, tb;
  ForwardSeq fa{tokens, &ta, 0, true}, fb{tokens, &tb, 0, true};
  REQUIRE((*gguf)->lm().Forward(*ca, absl::MakeSpan(&fa, 1), &a).ok());
  REQUIRE((*hf)->lm().Forward(*cb, absl::MakeSpan(&fb, 1), &b).ok());
  CHECK(a == b);
}

TEST_CASE("a broken OLMo 2 file is refused with a clear error", "[olmo2]") {
  auto load = [](const std::function<void(std::vector<Tensor>&, GgufWriter&)>& edit) {
    const std::string path = testing::ScratchDir() + "/olmo2.gguf";
    WriteOlmo2Model(path, edit);
    return Model::Load(path);
  };
  SECTION("a q norm of one head (Qwen3's shape), not the whole projection") {
    auto m = load([](std::vector<Tensor>& ts, GgufWriter&) {
      for (Tensor& t : ts) {
        if (t.name == "blk.1.attn_q_norm.weight") {
          t.dims = {kHeadDim};
          t.data.resize(kHeadDim);
        }
      }
    });
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("shape mismatch for tensor blk.1.attn_q_norm.weight: stored [16], "
                               "expected [128]"));
  }
  SECTION("a k norm of the q projection's size") {
    auto m = load([](std::vector<Tensor>& ts, GgufWriter&) {
      for (Tensor& t : ts) {
        if (t.name == "blk.0.attn_k_norm.weight") {
          t.dims = {kHeads * kHeadDim};
          t.data.resize(kHeads * kHeadDim);
        }
      }
    });
    REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("blk.0.attn_k_norm.weight: stored [128], expected [64]"));
  }
  SECTION("OLMo 3's sliding-window layers") {
    auto m = load([](std::vector<Tensor>&, GgufWriter& w) {
      w.SetUint32("olmo2.attention.sliding_window", 4096);
      w.Set("olmo2.attention.sliding_window_pattern",
            GgufArray(GgufValueType::kBool, {GgufBool(true), GgufBool(false)}));
    });
    REQUIRE(m.status().code() == absl::StatusCode::kUnimplemented);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("sliding-window attention layers (olmo2.attention.sliding_window_"
                               "pattern) are not supported for olmo2"));
  }
  SECTION("no post-FFN norm") {
    auto m = load([](std::vector<Tensor>& ts, GgufWriter&) {
      ts.erase(
          std::remove_if(ts.begin(), ts.end(),
                         [](const Tensor& t) { return t.name == "blk.0.post_ffw_norm.weight"; }),
          ts.end());
    });
    REQUIRE(m.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("missing tensor blk.0.post_ffw_norm.weight"));
  }
}

// Writes the model where tests/data/olmo2/README.md's commands expect it:
//   TEXTGEN_OLMO2_OUT=/path/olmo2.gguf engine_model_tests "[olmo2-write]"
TEST_CASE("write the OLMo 2 test model to $TEXTGEN_OLMO2_OUT", "[.][olmo2-write]") {
  const char* out = std::getenv("TEXTGEN_OLMO2_OUT");
  REQUIRE(out != nullptr);
  WriteOlmo2Model(out);
  auto f = GgufFile::Open(out);
  REQUIRE(f.ok());
  WARN(out << ": tensor checksum " << std::hex << TensorChecksum(**f));
}

}  // namespace olmo2_parity_test
}  // namespace textgen
