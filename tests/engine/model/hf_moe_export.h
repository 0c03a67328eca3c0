// Writes a Hugging Face checkpoint directory of one of ../shared/models/moe's GGUF mixtures of
// experts, as transformers lays them out (MixtralForCausalLM, Qwen3MoeForCausalLM): one tensor
// per expert, two safetensors shards with model.safetensors.index.json, a config.json, and the
// same-vocabulary tokenizer files of a dense ../arch model. The HF names are written out here
// from transformers' modeling code, not read from the engine's family tables, so a wrong name
// in a table fails the test instead of agreeing with itself.
#ifndef TEXTGEN_TESTS_ENGINE_MODEL_HF_MOE_EXPORT_H_
#define TEXTGEN_TESTS_ENGINE_MODEL_HF_MOE_EXPORT_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/gguf_file.h"
#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen::testing {

// One tensor of the checkpoint: F32 values, row-major shape.
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A safetensors file: 8-byte little-endian header length, the JSON header, the data.
inline std::string SafetensorsBytes(const std::map<std::string, HfTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data to 8 bytes
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

// GGUF dims {in, out} / {in, out, n_expert} -> row-major values of expert `e` (or the whole
// tensor when e < 0).
inline HfTensor FromGguf(const GgufTensorInfo& t, int64_t e = -1) {
  REQUIRE(t.type == DType::kF32);
  HfTensor out;
  const float* f = reinterpret_cast<const float*>(t.data);
  if (e < 0) {
    out.shape.assign(t.dims.rbegin(), t.dims.rend());
    out.values.assign(f, f + t.num_elements);
  } else {
    REQUIRE(t.dims.size() == 3);
    out.shape = {t.dims[1], t.dims[0]};
    const int64_t n = t.dims[0] * t.dims[1];
    out.values.assign(f + e * n, f + (e + 1) * n);
  }
  return out;
}

// GGUF's q/k rows (RoPE pairs interleaved: row 2i + j of a head) in Hugging Face's rotate-half
// order (row j * head_dim / 2 + i), as convert_hf_to_gguf.py's permutation undone.
inline HfTensor ToRotateHalf(HfTensor t, int n_heads) {
  const int64_t rows = t.shape[0], cols = t.shape[1], head_dim = rows / n_heads;
  std::vector<float> out(t.values.size());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t gguf_row = h * head_dim + 2 * i + j;
        const int64_t hf_row = h * head_dim + j * (head_dim / 2) + i;
        std::memcpy(&out[hf_row * cols], &t.values[gguf_row * cols], cols * sizeof(float));
      }
    }
  }
  t.values = std::move(out);
  return t;
}

// Writes `models/moe/<name>.gguf` (name: "qwen3moe" or "mixtral") as a Hugging Face directory
// under `dir` and returns its path. `edit_config` may change config.json before it is written
// and the tensors named in `leave_out` are not written (for the error tests).
template <typename EditConfig>
std::string ExportHfMoe(const std::string& name, const std::string& dir, EditConfig edit_config,
                        const std::vector<std::string>& leave_out = {}) {
  const bool mixtral = name == "mixtral";
  auto gguf = GgufFile::Open(ModelPath("moe/" + name + ".gguf"));
  REQUIRE(gguf.ok());
  auto config = ConfigFromGguf(**gguf);
  REQUIRE(config.ok());
  const ModelConfig& c = *config;
  const std::string out = dir + "/" + name + "-hf";
  std::filesystem::create_directories(out);

  // Layer l's tensors go to shard l % 2 (the embedding and final norm to shard 0).
  std::map<std::string, HfTensor> shards[2];
  auto tensor = [&](const std::string& n) -> const GgufTensorInfo& {
    const GgufTensorInfo* t = (*gguf)->FindTensor(n);
    INFO(n);
    REQUIRE(t != nullptr);
    return *t;
  };
  shards[0]["model.embed_tokens.weight"] = FromGguf(tensor("token_embd.weight"));
  shards[0]["model.norm.weight"] = FromGguf(tensor("output_norm.weight"));
  const std::string moe = mixtral ? "block_sparse_moe." : "mlp.";
  const char* expert_names[3][2] = {{"ffn_gate_exps", mixtral ? "w1" : "gate_proj"},
                                    {"ffn_up_exps", mixtral ? "w3" : "up_proj"},
                                    {"ffn_down_exps", mixtral ? "w2" : "down_proj"}};
  for (int l = 0; l < c.n_layers; ++l) {
    std::map<std::string, HfTensor>& s = shards[l % 2];
    const std::string g = absl::StrCat("blk.", l, "."), h = absl::StrCat("model.layers.", l, ".");
    s[h + "input_layernorm.weight"] = FromGguf(tensor(g + "attn_norm.weight"));
    s[h + "post_attention_layernorm.weight"] = FromGguf(tensor(g + "ffn_norm.weight"));
    HfTensor q = FromGguf(tensor(g + "attn_q.weight")), k = FromGguf(tensor(g + "attn_k.weight"));
    // Llama (Mixtral) rows were permuted to GGUF's interleaved RoPE; Qwen3 keeps HF's order.
    s[h + "self_attn.q_proj.weight"] = mixtral ? ToRotateHalf(q, c.n_heads) : q;
    s[h + "self_attn.k_proj.weight"] = mixtral ? ToRotateHalf(k, c.n_kv_heads) : k;
    s[h + "self_attn.v_proj.weight"] = FromGguf(tensor(g + "attn_v.weight"));
    s[h + "self_attn.o_proj.weight"] = FromGguf(tensor(g + "attn_output.weight"));
    if (!mixtral) {
      s[h + "self_attn.q_norm.weight"] = FromGguf(tensor(g + "attn_q_norm.weight"));
      s[h + "self_attn.k_norm.weight"] = FromGguf(tensor(g + "attn_k_norm.weight"));
    }
    s[h + moe + "gate.weight"] = FromGguf(tensor(g + "ffn_gate_inp.weight"));
    for (int64_t e = 0; e < c.moe.n_expert; ++e) {
      for (const auto& [stack, hf] : expert_names) {
        s[absl::StrCat(h, moe, "experts.", e, ".", hf, ".weight")] =
            FromGguf(tensor(g + stack + ".weight"), e);
      }
    }
  }
  for (const std::string& n : leave_out) {
    REQUIRE(shards[0].erase(n) + shards[1].erase(n) == 1);
  }
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", {}}};
  for (int i = 0; i < 2; ++i) {
    const std::string file = absl::StrCat("model-0000", i + 1, "-of-00002.safetensors");
    WriteFile(out + "/" + file, SafetensorsBytes(shards[i]));
    for (const auto& [n, t] : shards[i]) index["weight_map"][n] = file;
  }
  WriteFile(out + "/model.safetensors.index.json", index.dump(2));

  nlohmann::json cj = {
      {"model_type", mixtral ? "mixtral" : "qwen3_moe"},
      {"architectures", {mixtral ? "MixtralForCausalLM" : "Qwen3MoeForCausalLM"}},
      {"vocab_size", c.n_vocab},
      {"hidden_size", c.n_embd},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.n_ctx},
      {"rope_theta", c.rope_base},
      {"rms_norm_eps", c.rms_eps},
      {"tie_word_embeddings", true},
      {"num_experts_per_tok", c.moe.n_expert_used},
      {"torch_dtype", "float32"},
  };
  if (mixtral) {
    cj["intermediate_size"] = c.moe.n_ff_expert;
    cj["num_local_experts"] = c.moe.n_expert;
  } else {
    cj["intermediate_size"] = c.n_ff;
    cj["moe_intermediate_size"] = c.moe.n_ff_expert;
    cj["num_experts"] = c.moe.n_expert;
    cj["norm_topk_prob"] = true;
    cj["decoder_sparse_step"] = 1;
    cj["mlp_only_layers"] = nlohmann::json::array();
  }
  edit_config(cj);
  WriteFile(out + "/config.json", cj.dump(2));
  // The dense models of ../arch share the MoE models' vocabulary (models/moe/README.md).
  const std::string tok = ModelPath(mixtral ? "arch/llama-rope-linear-hf" : "arch/qwen3-hf");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    std::filesystem::copy_file(tok + "/" + f, out + "/" + f);
  }
  return out;
}

inline std::string ExportHfMoe(const std::string& name, const std::string& dir) {
  return ExportHfMoe(name, dir, [](nlohmann::json&) {});
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_ENGINE_MODEL_HF_MOE_EXPORT_H_
