// Architecture configuration: Llama 3 and longrope frequency factors, sharded safetensors, the
// context shift under every RoPE variant, and config.json values of the wrong type or range
// (a clear status naming the key, never a crash: CI runs this under ASan).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/model/llama_model.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace arch_config_test {
namespace fs = std::filesystem;

const char* const kArchModels[] = {"llama-rope-llama3",
                                   "llama-rope-linear",
                                   "qwen2",
                                   "qwen3",
                                   "qwen3-hd32",
                                   "phi3",
                                   "gemma2",
                                   "gemma3"};

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c, int block_size) {
  return testing::MakeTestCache(c, {.block_size = block_size});
}

// A copy of an HF directory in a scratch dir: every file linked except those in `skip`.
std::string LinkDir(const std::string& src, const std::vector<std::string>& skip) {
  const std::string dir = testing::ScratchDir();
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    fs::create_symlink(e.path(), fs::path(dir) / name);
  }
  return dir;
}

TEST_CASE("Llama 3 rope_scaling gives the factors llama.cpp's converter writes") {
  // llama-rope-llama3: factor 8, low 1, high 4, original context 128, head_dim 16.
  const std::vector<float> f = Llama3RopeFactors(10000.0f, 16, 8.0f, 1.0f, 4.0f, 128);
  const std::vector<float> want = {1, 1, 2.3391166f, 8, 8, 8, 8, 8};
  REQUIRE(f.size() == want.size());
  for (size_t i = 0; i < f.size(); ++i) CHECK(f[i] == Approx(want[i]).epsilon(1e-6));
  // And both formats of the model agree.
  auto gguf = GgufFile::Open(testing::ModelPath("arch/llama-rope-llama3.gguf"));
  REQUIRE(gguf.ok());
  auto from_gguf = ConfigFromGguf(**gguf);
  auto from_hf =
      ConfigFromHfConfigJson(testing::ModelPath("arch/llama-rope-llama3-hf/config.json"));
  REQUIRE(from_gguf.ok());
  REQUIRE(from_hf.ok());
  REQUIRE(from_gguf->rope_freq_factors.size() == 8);
  for (size_t i = 0; i < 8; ++i) {
    CHECK(from_hf->rope_freq_factors[i] == Approx(from_gguf->rope_freq_factors[i]).epsilon(1e-6));
  }
  auto linear = ConfigFromHfConfigJson(testing::ModelPath("arch/llama-rope-linear-hf/config.json"));
  REQUIRE(linear.ok());
  CHECK(linear->rope_freq_scale == 0.25f);
}

TEST_CASE("longrope picks the long factors only beyond the original context") {
  const std::string dir = LinkDir(testing::ModelPath("arch/phi3-hf"), {"config.json"});
  nlohmann::json j =
      nlohmann::json::parse(testing::ReadFile(testing::ModelPath("arch/phi3-hf/config.json")));
  j["max_position_embeddings"] = 2048;
  j["original_max_position_embeddings"] = 512;
  std::vector<double> lf(8), sf(8);
  for (int i = 0; i < 8; ++i) {
    lf[i] = 1.0 + i;
    sf[i] = 1.0 + 0.1 * i;
  }
  j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", lf}, {"short_factor", sf}};
  testing::WriteFile(dir + "/config.json", j.dump());
  auto c = ConfigFromHfConfigJson(dir + "/config.json");
  REQUIRE(c.ok());
  // transformers' default attention factor: sqrt(1 + ln(4) / ln(512)).
  CHECK(c->rope_attn_factor == Approx(std::sqrt(1 + std::log(4.0) / std::log(512.0))));
  CHECK(RopeFactorsFor(*c, 512)[3] == Approx(1.3));
  CHECK(RopeFactorsFor(*c, 513)[3] == Approx(4.0));
  CHECK(RopeFactorsFor(*c, 2048)[7] == Approx(8.0));
  // A model served at a short context uses the short factors and still loads and runs.
  ModelOptions mo;
  mo.llama.n_ctx = 256;
  auto m = Model::Load(dir, mo);
  REQUIRE(m.ok());
  j["rope_scaling"]["long_factor"] = std::vector<double>(7, 1.0);
  testing::WriteFile(dir + "/config.json", j.dump());
  auto bad = ConfigFromHfConfigJson(dir + "/config.json");
  REQUIRE(!bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("long_factor"));
}

TEST_CASE("a sharded safetensors checkpoint loads as the single file does") {
  for (const char* name : {"qwen2", "phi3", "gemma3"}) {
    SECTION(name) {
      const std::string src = testing::ModelPath(std::string("arch/") + name + "-hf");
      const std::string dir = LinkDir(src, {"model.safetensors"});
      // Split model.safetensors into two shards by tensor (header: u64 size + JSON).
      const std::string bytes = testing::ReadFile(src + "/model.safetensors");
      uint64_t header_len;
      std::memcpy(&header_len, bytes.data(), 8);
      const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
      const std::string data = bytes.substr(8 + header_len);
      nlohmann::json shard_header[2] = {nlohmann::json::object(), nlohmann::json::object()};
      std::string shard_data[2];
      nlohmann::json weight_map = nlohmann::json::object();
      int i = 0;
      for (const auto& [tname, info] : header.items()) {
        if (tname == "__metadata__") continue;
        const int s = i++ % 2;
        const uint64_t b = info["data_offsets"][0], e = info["data_offsets"][1];
        nlohmann::json t = info;
        t["data_offsets"] = {shard_data[s].size(), shard_data[s].size() + (e - b)};
        shard_data[s] += data.substr(b, e - b);
        shard_header[s][tname] = t;
        weight_map[tname] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
      }
      for (int s = 0; s < 2; ++s) {
        const std::string h = shard_header[s].dump();
        const uint64_t n = h.size();
        std::string out(reinterpret_cast<const char*>(&n), 8);
        testing::WriteFile(dir + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors",
                           out + h + shard_data[s]);
      }
      testing::WriteFile(dir + "/model.safetensors.index.json",
                         nlohmann::json{{"metadata", {}}, {"weight_map", weight_map}}.dump());
      auto one = Model::Load(src);
      auto sharded = Model::Load(dir);
      REQUIRE(one.ok());
      INFO(sharded.status().ToString());
      REQUIRE(sharded.ok());
      const std::vector<int32_t> tokens = {1, 80, 147, 201, 282, 57};
      std::vector<float> la, lb;
      auto ca = MakeCache((*one)->config(), 16), cb = MakeCache((*sharded)->config(), 16);
      BlockTable ta, tb;
      ForwardSeq fa{tokens, &ta, 0, false}, fb{tokens, &tb, 0, false};
      REQUIRE((*one)->lm().Forward(*ca, absl::MakeSpan(&fa, 1), &la).ok());
      REQUIRE((*sharded)->lm().Forward(*cb, absl::MakeSpan(&fb, 1), &lb).ok());
      CHECK(la == lb);
      // A shard name that leaves the directory is refused.
      testing::WriteFile(dir + "/model.safetensors.index.json",
                         R"({"weight_map": {"model.norm.weight": "../x.safetensors"}})");
      auto escaped = Model::Load(dir);
      REQUIRE(!escaped.ok());
      CHECK_THAT(std::string(escaped.status().message()), Catch::Contains("shard"));
    }
  }
}

TEST_CASE("gpt-oss's GGUF hyperparameters: YaRN, sliding-window pattern, routing") {
  auto gguf = GgufFile::Open(testing::ModelPath("moe/gpt-oss.gguf"));
  REQUIRE(gguf.ok());
  auto c = ConfigFromGguf(**gguf);
  REQUIRE(c.ok());
  CHECK(c->rope_yarn);
  CHECK(c->rope_freq_scale == 1.0f / 32);
  CHECK(c->n_ctx_orig == 512);
  CHECK(c->yarn_beta_fast == 32.0f);
  CHECK(c->yarn_beta_slow == 1.0f);
  CHECK(c->rope_attn_factor == Approx(1 + 0.1 * std::log(32.0)).epsilon(1e-6));
  CHECK(c->sliding_window == 16);
  CHECK(c->swa_layers == std::vector<bool>{true, false});  // layer 0 sliding, layer 1 global
  CHECK(c->moe.n_expert == 4);
  CHECK(c->moe.n_expert_used == 2);
  CHECK(c->moe.n_ff_expert == 192);
  CHECK(c->moe.gating == MoeGating::kSoftmaxWeight);
  CHECK(c->moe.act == FfnActivation::kSwigluOai);
  CHECK(c->moe.biases);
  CHECK_FALSE(c->moe.norm_topk);
  CHECK_FALSE(c->tied_embeddings);
}

// After a shift, the first layer's cached keys equal those computed afresh at the new
// positions (layer 0's K depends only on the token and its position; deeper layers' K also
// depend on the dropped tokens, so no shift can make them equal a recomputation), for NEOX
// RoPE, frequency factors, linear scaling, longrope's attention factor, Gemma 3's local base
// and gpt-oss's YaRN (with its magnitude scale, applied once).
TEST_CASE("the context shift re-rotates keys exactly for every RoPE variant") {
  for (const char* name : {"arch/llama-rope-llama3.gguf", "arch/llama-rope-linear-hf",
                           "arch/qwen2-hf", "arch/qwen3-hd32.gguf", "arch/phi3.gguf",
                           "arch/gemma2.gguf", "arch/gemma3-hf", "moe/gpt-oss.gguf"}) {
    SECTION(name) {
      auto model = Model::Load(testing::ModelPath(name));
      REQUIRE(model.ok());
      CausalLm& m = (*model)->lm();
      const ModelConfig& c = m.config();
      const int bs = 8;
      auto cache = MakeCache(c, bs);
      std::vector<int32_t> tokens(40);
      for (int i = 0; i < 40; ++i) tokens[i] = 3 + (i * 37) % 1500;
      BlockTable t;
      std::vector<float> logits;
      ForwardSeq f{tokens, &t, 0, false};
      REQUIRE(m.Forward(*cache, absl::MakeSpan(&f, 1), &logits).ok());
      BlockTable* tables[] = {&t};
      REQUIRE(m.ShiftContext(*cache, tables, /*keep_blocks=*/1, /*drop_blocks=*/2).ok());
      REQUIRE(t.num_tokens == 24);

      std::vector<int32_t> kept(tokens.begin(), tokens.begin() + 8);
      kept.insert(kept.end(), tokens.begin() + 24, tokens.end());
      BlockTable fresh;
      ForwardSeq ff{kept, &fresh, 0, false};
      REQUIRE(m.Forward(*cache, absl::MakeSpan(&ff, 1), &logits).ok());
      double max_diff = 0;
      const BlockPool& pool = cache->pool();
      for (int b = 0; b < 3; ++b) {
        for (int h = 0; h < c.n_kv_heads; ++h) {
          const float* k1 = pool.Key(t.blocks[b], 0, h);
          const float* k2 = pool.Key(fresh.blocks[b], 0, h);
          const float* v1 = pool.Value(t.blocks[b], 0, h);
          const float* v2 = pool.Value(fresh.blocks[b], 0, h);
          for (int i = 0; i < bs * c.head_dim; ++i) {
            max_diff = std::max(max_diff, std::abs(double{k1[i]} - k2[i]));
            max_diff = std::max(max_diff, std::abs(double{v1[i]} - v2[i]));
          }
        }
      }
      INFO(name << " max |layer-0 K/V diff| " << max_diff);
      CHECK(max_diff < 1e-4);
      // The shifted cache still serves: one more token decodes.
      const int32_t next = 77;
      ForwardSeq step{absl::MakeConstSpan(&next, 1), &t, 24, false};
      REQUIRE(m.Forward(*cache, absl::MakeSpan(&step, 1), &logits).ok());
      cache->Free(t);
      cache->Free(fresh);
    }
  }
}

// Every value of every architecture's config.json (and of its rope_scaling object) replaced in
// turn by values of other types and out of range: each load ends in OK or a status, and the
// known bad values name their key.
TEST_CASE("config.json fuzz: wrong types and ranges are statuses, never crashes") {
  // Raw JSON texts (1e999 overflows a double: the parser refuses the file).
  const std::vector<std::string> values = {"null",
                                           "true",
                                           "\"x\"",
                                           "-1",
                                           "0",
                                           "1e999",
                                           "-1e999",
                                           "123456789012345",
                                           "0.5",
                                           "[]",
                                           "{}",
                                           "[1,2]",
                                           "18446744073709551615",
                                           "1e-40"};
  int loads = 0, ok = 0;
  for (const char* name : kArchModels) {
    const std::string src = testing::ModelPath(std::string("arch/") + name + "-hf");
    const std::string dir = LinkDir(src, {"config.json"});
    const nlohmann::json base = nlohmann::json::parse(testing::ReadFile(src + "/config.json"));
    std::vector<std::vector<std::string>> paths;
    for (const auto& [k, v] : base.items()) {
      paths.push_back({k});
      if (v.is_object()) {
        for (const auto& [k2, v2] : v.items()) paths.push_back({k, k2});
      }
    }
    for (const auto& path : paths) {
      for (const std::string& value : values) {
        nlohmann::json j = base;
        nlohmann::json* slot = &j[path[0]];
        if (path.size() == 2) slot = &(*slot)[path[1]];
        *slot = "@@VALUE@@";
        std::string text = j.dump();
        text.replace(text.find("\"@@VALUE@@\""), 11, value);
        testing::WriteFile(dir + "/config.json", text);
        auto m = Model::Load(dir);
        ++loads;
        if (m.ok()) {
          ++ok;
          continue;
        }
        INFO(name << ": " << path.back() << " = " << value << " -> " << m.status().ToString());
        CHECK(!m.status().message().empty());
      }
    }
  }
  WARN(loads << " loads of altered configs, " << ok << " accepted");

  // The two SIGABRTs and the silent inf of issue 12, by name.
  const std::string src = testing::ModelPath("arch/qwen3-hf");
  const std::string dir = LinkDir(src, {"config.json"});
  const nlohmann::json base = nlohmann::json::parse(testing::ReadFile(src + "/config.json"));
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"model_type", "5"},
                                                        {"tie_word_embeddings", "\"yes\""},
                                                        {"rms_norm_eps", "1e300"},
                                                        {"rope_theta", "-3"},
                                                        {"num_attention_heads", "2.5"},
                                                        {"head_dim", "\"32\""}}) {
    nlohmann::json j = base;
    j[key] = "@@VALUE@@";
    std::string text = j.dump();
    text.replace(text.find("\"@@VALUE@@\""), 11, value);
    testing::WriteFile(dir + "/config.json", text);
    auto m = Model::Load(dir);
    INFO(key << " = " << value);
    REQUIRE(!m.ok());
    CHECK_THAT(std::string(m.status().message()), Catch::Contains(key));
  }
}

}  // namespace arch_config_test
}  // namespace textgen
