// llama-quantize's per-tensor types for the shapes people run, worked out by hand from
// llama_tensor_get_type (src/llama-quant.cpp) for stories110M (12 layers, 12 heads, no GQA,
// untied output, rows of 768 and 2048) and Llama-3.2-1B (16 layers, GQA 4, tied embeddings).
#include "client/synth/quant_mix.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace quant_mix_test {

const QuantMixModel kStories110M{.n_layer = 12, .n_head = 12, .n_head_kv = 12, .tied = false};
const QuantMixModel kLlama32_1B{.n_layer = 16, .n_head = 32, .n_head_kv = 8, .tied = true};

QuantMix Mix(const std::string& name) {
  absl::StatusOr<QuantMix> m = FindQuantMix(name);
  REQUIRE(m.ok());
  return *m;
}

// Layers (of `n`) whose `tensor` gets `type`; the others get the default checked separately.
std::vector<int> LayersOf(const QuantMix& mix, const QuantMixModel& m, const std::string& tensor,
                          int64_t ncols, DType type) {
  std::vector<int> layers;
  for (int l = 0; l < m.n_layer; ++l) {
    if (ChooseTensorType(mix, m, absl::StrCat("blk.", l, ".", tensor), ncols) == type) {
      layers.push_back(l);
    }
  }
  return layers;
}

TEST_CASE("quant mixes carry llama.cpp's LLAMA_FTYPE values", "[synth]") {
  const std::map<std::string, uint32_t> want = {
      {"f32", 0},     {"f16", 1},     {"q4_0", 2},    {"q4_1", 3},    {"q8_0", 7},
      {"q5_0", 8},    {"q5_1", 9},    {"q2_k", 10},   {"q3_k_s", 11}, {"q3_k_m", 12},
      {"q3_k_l", 13}, {"q4_k_s", 14}, {"q4_k_m", 15}, {"q5_k_s", 16}, {"q5_k_m", 17},
      {"q6_k", 18},   {"iq4_nl", 25}, {"iq4_xs", 30}, {"bf16", 32},   {"mxfp4_moe", 38}};
  CHECK(QuantMixes().size() == want.size());
  for (const auto& [name, ftype] : want) {
    INFO(name);
    CHECK(Mix(name).llama_ftype == ftype);
  }
  CHECK_THAT(std::string(FindQuantMix("Q4_K_M").status().message()), Catch::Contains("q4_k_m"));
  CHECK_FALSE(FindQuantMix("q4_k").ok());
}

TEST_CASE("Q4_K_M on stories110M: Q6_K attn_v/ffn_down by use_more_bits, Q6_K output", "[synth]") {
  const QuantMix mix = Mix("q4_k_m");
  const auto& m = kStories110M;
  CHECK(ChooseTensorType(mix, m, "token_embd.weight", 768) == DType::kQ4_K);
  CHECK(ChooseTensorType(mix, m, "output.weight", 768) == DType::kQ6_K);
  // use_more_bits(i, 12): i < 1, i >= 10, or (i - 1) % 3 == 2.
  const std::vector<int> more = {0, 3, 6, 9, 10, 11};
  CHECK(LayersOf(mix, m, "attn_v.weight", 768, DType::kQ6_K) == more);
  CHECK(LayersOf(mix, m, "ffn_down.weight", 2048, DType::kQ6_K) == more);
  for (const char* t : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight",
                        "ffn_up.weight"}) {
    INFO(t);
    CHECK(LayersOf(mix, m, t, 768, DType::kQ4_K).size() == 12);
  }
  CHECK(LayersOf(mix, m, "attn_v.weight", 768, DType::kQ4_K).size() == 6);
}

TEST_CASE("experts: Mixtral's 8-expert rules, and expert stacks follow the dense names",
          "[synth]") {
  const QuantMix mix = Mix("q4_k_m");
  const QuantMixModel mixtral{.n_layer = 32, .n_head = 32, .n_head_kv = 8, .n_expert = 8};
  CHECK(LayersOf(mix, mixtral, "attn_v.weight", 4096, DType::kQ8_0).size() == 32);
  CHECK(LayersOf(mix, mixtral, "attn_k.weight", 4096, DType::kQ8_0).size() == 32);
  CHECK(LayersOf(mix, mixtral, "attn_output.weight", 4096, DType::kQ5_K).size() == 32);
  CHECK(LayersOf(mix, mixtral, "attn_q.weight", 4096, DType::kQ4_K).size() == 32);
  // ffn_down_exps takes ffn_down's use_more_bits rule by layer; gate/up stay Q4_K.
  const QuantMixModel qwen3moe{.n_layer = 48, .n_head = 32, .n_head_kv = 4, .n_expert = 128};
  const std::vector<int> down = LayersOf(mix, qwen3moe, "ffn_down_exps.weight", 768, DType::kQ6_K);
  CHECK(down == LayersOf(mix, qwen3moe, "ffn_down.weight", 768, DType::kQ6_K));
  CHECK(down.size() == 24);  // use_more_bits(i, 48): 6 + 6 + every third of the 36 between
  CHECK(LayersOf(mix, qwen3moe, "ffn_up_exps.weight", 2048, DType::kQ4_K).size() == 48);
  // 128 experts: no Mixtral rule (attn_k stays Q4_K).
  CHECK(LayersOf(mix, qwen3moe, "attn_k.weight", 2048, DType::kQ4_K).size() == 48);
}

TEST_CASE("MXFP4_MOE: expert stacks MXFP4, every other matrix Q8_0", "[synth]") {
  // llama_tensor_get_type_impl: the output (and a tied token_embd) Q8_0 first, then for this
  // ftype ne[2] > 1 -> MXFP4, else Q8_0, whatever the layer or the GQA ratio.
  const QuantMix mix = Mix("mxfp4_moe");
  CHECK(mix.base == DType::kMXFP4);
  const QuantMixModel gpt_oss{.n_layer = 24, .n_head = 64, .n_head_kv = 8, .n_expert = 32};
  CHECK(ChooseTensorType(mix, gpt_oss, "token_embd.weight", 2880) == DType::kQ8_0);
  CHECK(ChooseTensorType(mix, gpt_oss, "output.weight", 2880) == DType::kQ8_0);
  for (const char* t : {"ffn_gate_exps.weight", "ffn_up_exps.weight"}) {
    INFO(t);
    CHECK(LayersOf(mix, gpt_oss, t, 2880, DType::kMXFP4).size() == 24);
  }
  CHECK(LayersOf(mix, gpt_oss, "ffn_down_exps.weight", 2880, DType::kMXFP4).size() == 24);
  for (const char* t : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) {
    INFO(t);
    CHECK(LayersOf(mix, gpt_oss, t, 2880, DType::kQ8_0).size() == 24);
  }
  // Mixtral's 8-expert rules do not apply to this ftype; a dense model is all Q8_0, tied
  // embeddings included.
  const QuantMixModel mixtral{.n_layer = 32, .n_head = 32, .n_head_kv = 8, .n_expert = 8};
  CHECK(LayersOf(mix, mixtral, "attn_output.weight", 4096, DType::kQ8_0).size() == 32);
  CHECK(LayersOf(mix, mixtral, "ffn_down_exps.weight", 14336, DType::kMXFP4).size() == 32);
  CHECK(ChooseTensorType(mix, kLlama32_1B, "token_embd.weight", 2048) == DType::kQ8_0);
  CHECK(LayersOf(mix, kLlama32_1B, "ffn_down.weight", 8192, DType::kQ8_0).size() == 16);
  // Rows that fit no 32-value block: F16 (llama-quantize has no fallback for Q8_0 and stops).
  CHECK(ChooseTensorType(mix, gpt_oss, "blk.0.attn_q.weight", 100) == DType::kF16);
}

TEST_CASE("Llama-3.2-1B: tied token_embd is the output, and the GQA-4 rules apply", "[synth]") {
  const auto& m = kLlama32_1B;
  // use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2.
  const std::vector<int> more = {0, 1, 4, 7, 10, 13, 14, 15};
  {
    const QuantMix mix = Mix("q4_k_m");
    CHECK(ChooseTensorType(mix, m, "token_embd.weight", 2048) == DType::kQ6_K);
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ6_K) == more);
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ6_K) == more);
    CHECK(LayersOf(mix, m, "attn_k.weight", 2048, DType::kQ4_K).size() == 16);
  }
  {
    const QuantMix mix = Mix("q2_k");
    CHECK(ChooseTensorType(mix, m, "token_embd.weight", 2048) == DType::kQ6_K);
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ4_K).size() == 16);  // n_gqa >= 4
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ3_K).size() == 16);
    CHECK(LayersOf(mix, m, "attn_output.weight", 2048, DType::kQ3_K).size() == 16);
    CHECK(LayersOf(mix, m, "ffn_up.weight", 2048, DType::kQ2_K).size() == 16);
  }
  {
    const QuantMix mix = Mix("q3_k_m");
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ5_K) == std::vector<int>{0, 1});
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ5_K) == std::vector<int>{0});
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ4_K).size() == 15);
    CHECK(LayersOf(mix, m, "attn_output.weight", 2048, DType::kQ4_K).size() == 16);
    CHECK(LayersOf(mix, m, "attn_q.weight", 2048, DType::kQ3_K).size() == 16);
  }
  {
    const QuantMix mix = Mix("q3_k_l");
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ5_K).size() == 16);
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ5_K).size() == 16);
    CHECK(LayersOf(mix, m, "attn_output.weight", 2048, DType::kQ5_K).size() == 16);
  }
  {
    const QuantMix mix = Mix("q4_k_s");
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ5_K) == std::vector<int>{0, 1, 2, 3});
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ5_K) == std::vector<int>{0, 1});
  }
  {
    const QuantMix mix = Mix("q5_k_m");
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ6_K) == more);
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ6_K) == more);
    CHECK(LayersOf(mix, m, "ffn_gate.weight", 2048, DType::kQ5_K).size() == 16);
  }
  {
    const QuantMix mix = Mix("iq4_xs");
    CHECK(ChooseTensorType(mix, m, "token_embd.weight", 2048) == DType::kQ6_K);
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, DType::kQ5_K).size() == 16);
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kQ5_K) == std::vector<int>{0, 1});
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, DType::kIQ4_XS).size() == 14);
  }
  for (const char* name : {"q3_k_s", "q5_k_s", "q6_k", "q4_0", "q5_1"}) {
    INFO(name);
    const QuantMix mix = Mix(name);
    CHECK(ChooseTensorType(mix, m, "token_embd.weight", 2048) == DType::kQ6_K);
    CHECK(LayersOf(mix, m, "attn_v.weight", 2048, mix.base).size() == 16);
    CHECK(LayersOf(mix, m, "ffn_down.weight", 8192, mix.base).size() == 16);
  }
}

TEST_CASE("rows that are not a multiple of 256 fall back as llama-quantize does", "[synth]") {
  // Qwen2.5-0.5B's rows of 896 values (3.5 super-blocks), GQA 7, tied.
  const QuantMixModel qwen{.n_layer = 24, .n_head = 14, .n_head_kv = 2, .tied = true};
  CHECK(ChooseTensorType(Mix("q4_k_m"), qwen, "blk.3.attn_q.weight", 896) == DType::kQ5_0);
  CHECK(ChooseTensorType(Mix("q4_k_m"), qwen, "blk.0.attn_v.weight", 896) == DType::kQ8_0);
  CHECK(ChooseTensorType(Mix("q4_k_m"), qwen, "blk.0.ffn_down.weight", 4864) == DType::kQ6_K);
  CHECK(ChooseTensorType(Mix("q4_k_m"), qwen, "token_embd.weight", 896) == DType::kQ8_0);
  CHECK(ChooseTensorType(Mix("q5_k_s"), qwen, "blk.3.attn_q.weight", 896) == DType::kQ5_1);
  CHECK(ChooseTensorType(Mix("q2_k"), qwen, "blk.3.attn_q.weight", 896) == DType::kQ4_0);
  CHECK(ChooseTensorType(Mix("q3_k_s"), qwen, "blk.3.ffn_up.weight", 896) == DType::kQ4_0);
  CHECK(ChooseTensorType(Mix("iq4_xs"), qwen, "blk.3.ffn_up.weight", 896) == DType::kIQ4_NL);
  CHECK(ChooseTensorType(Mix("q6_k"), qwen, "blk.3.ffn_up.weight", 896) == DType::kQ8_0);
  // Block-32 types need no fallback; the output of a Q4_0 file is Q6_K, or Q8_0 here.
  CHECK(ChooseTensorType(Mix("q4_0"), qwen, "blk.3.ffn_up.weight", 896) == DType::kQ4_0);
  CHECK(ChooseTensorType(Mix("q4_0"), qwen, "token_embd.weight", 896) == DType::kQ8_0);
  // stories15M: rows of 288 (not even 256) and 768.
  const QuantMixModel s15{.n_layer = 6, .n_head = 6, .n_head_kv = 6, .tied = false};
  CHECK(ChooseTensorType(Mix("q4_k_m"), s15, "output.weight", 288) == DType::kQ8_0);
  // use_more_bits(i, 6): 6 / 8 = 0, so only i >= 5 and i % 3 == 2 get more bits.
  CHECK(ChooseTensorType(Mix("q4_k_m"), s15, "blk.0.ffn_down.weight", 768) == DType::kQ4_K);
  CHECK(ChooseTensorType(Mix("q4_k_m"), s15, "blk.2.ffn_down.weight", 768) == DType::kQ6_K);
  CHECK(ChooseTensorType(Mix("q4_k_m"), s15, "blk.5.ffn_down.weight", 768) == DType::kQ6_K);
}

TEST_CASE("float file types keep every matrix in their type", "[synth]") {
  for (const char* name : {"f32", "f16", "bf16"}) {
    const QuantMix mix = Mix(name);
    CHECK(ChooseTensorType(mix, kLlama32_1B, "token_embd.weight", 2048) == mix.base);
    CHECK(ChooseTensorType(mix, kLlama32_1B, "blk.0.attn_v.weight", 2048) == mix.base);
    CHECK(ChooseTensorType(mix, kStories110M, "output.weight", 768) == mix.base);
  }
  const QuantMix q8 = Mix("q8_0");
  CHECK(ChooseTensorType(q8, kStories110M, "output.weight", 768) == DType::kQ8_0);
  CHECK(ChooseTensorType(q8, kLlama32_1B, "token_embd.weight", 2048) == DType::kQ8_0);
}

}  // namespace quant_mix_test
}  // namespace textgen
