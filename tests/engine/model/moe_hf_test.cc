// Hugging Face mixture-of-experts checkpoints (Qwen3MoeForCausalLM, MixtralForCausalLM): what is
// read from config.json and the clear errors for what is not supported or missing. Parity with
// llama.cpp is in arch_parity_test.cc.
#include <catch2/catch.hpp>
#include <string>

#include "engine/model/model.h"
#include "tests/engine/model/hf_moe_export.h"
#include "tests/test_util.h"

namespace textgen {
namespace moe_hf_test {

// Loads `name`'s exported directory after `edit` changed its config.json.
template <typename Edit>
absl::StatusOr<std::unique_ptr<Model>> LoadEdited(const std::string& name, Edit edit,
                                                  const std::vector<std::string>& leave_out = {}) {
  return Model::Load(testing::ExportHfMoe(name, testing::ScratchDir(), edit, leave_out), {});
}

TEST_CASE("HF MoE checkpoints read their expert keys", "[moe][hf]") {
  auto qwen = LoadEdited("qwen3moe", [](nlohmann::json&) {});
  REQUIRE(qwen.ok());
  const MoeConfig& q = (*qwen)->config().moe;
  CHECK(q.n_expert == 8);
  CHECK(q.n_expert_used == 4);
  CHECK(q.n_ff_expert == 96);
  CHECK(q.norm_topk);
  auto mixtral = LoadEdited("mixtral", [](nlohmann::json&) {});
  REQUIRE(mixtral.ok());
  const MoeConfig& m = (*mixtral)->config().moe;
  CHECK(m.n_expert == 4);
  CHECK(m.n_expert_used == 2);
  CHECK(m.n_ff_expert == 384);  // intermediate_size
  CHECK(m.norm_topk);
  auto plain = LoadEdited("qwen3moe", [](nlohmann::json& c) { c["norm_topk_prob"] = false; });
  REQUIRE(plain.ok());
  CHECK_FALSE((*plain)->config().moe.norm_topk);
}

TEST_CASE("HF MoE checkpoints: unsupported layouts and missing experts are clear errors",
          "[moe][hf]") {
  struct Case {
    const char* what;
    const char* model;
    void (*edit)(nlohmann::json&);
    const char* message;
    std::vector<std::string> leave_out = {};
  };
  const Case cases[] = {
      {"dense layers listed", "qwen3moe", [](nlohmann::json& c) { c["mlp_only_layers"] = {1}; },
       "mlp_only_layers"},
      {"a sparse step", "qwen3moe", [](nlohmann::json& c) { c["decoder_sparse_step"] = 2; },
       "decoder_sparse_step"},
      {"more experts than stored", "qwen3moe", [](nlohmann::json& c) { c["num_experts"] = 9; },
       "(model.layers.0.mlp.gate.weight): stored [8, 128], expected [9, 128]"},
      {"a Qwen3-MoE expert missing",
       "qwen3moe",
       [](nlohmann::json&) {},
       "missing tensor model.layers.1.mlp.experts.7.down_proj.weight (expert 7 of 8)",
       {"model.layers.1.mlp.experts.7.down_proj.weight"}},
      {"a Mixtral expert missing",
       "mixtral",
       [](nlohmann::json&) {},
       "missing tensor model.layers.0.block_sparse_moe.experts.2.w3.weight (expert 2 of 4)",
       {"model.layers.0.block_sparse_moe.experts.2.w3.weight"}},
      {"more used than exist", "mixtral", [](nlohmann::json& c) { c["num_experts_per_tok"] = 5; },
       "expert"},
      {"no experts used", "qwen3moe", [](nlohmann::json& c) { c.erase("num_experts_per_tok"); },
       "num_experts_per_tok"},
      {"a wrong expert width", "qwen3moe",
       [](nlohmann::json& c) { c["moe_intermediate_size"] = 95; }, "shape mismatch"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      auto m = LoadEdited(c.model, c.edit, c.leave_out);
      REQUIRE_FALSE(m.ok());
      INFO(m.status().message());
      CHECK(std::string(m.status().message()).find(c.message) != std::string::npos);
    }
  }
}

}  // namespace moe_hf_test
}  // namespace textgen
