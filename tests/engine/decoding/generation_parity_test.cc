// Acceptance test of the engine core: greedy decoding reproduces llama.cpp's outputs
// (../shared/reference/*.greedy.json) token for token, with logprobs within 1e-3.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "engine/decoding/generation.h"
#include "engine/model/causal_lm.h"
#include "engine/model/model.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/teacher_forced.h"
#include "tests/engine/model/test_cache.h"
#include "tests/test_util.h"

namespace textgen {
namespace generation_parity_test {

struct ParityCase {
  std::string model;      // file or directory under $TEXTGEN_MODELS
  std::string reference;  // file under the reference folder
};

std::unique_ptr<KvCache> MakeCache(const ModelConfig& c) {
  // Exact K/V: the references are F32 runs.
  return testing::MakeTestCache(c, {.num_blocks = c.n_ctx / 16 + 2});
}

// threads > 0: that many compute threads, with every matmul split across them (and prefill
// attention and element-wise ops, whose thresholds the no-cache passes exceed), so the threaded
// paths of the big models are checked on models small enough for references.
// max_tokens > 0: only the first max_tokens generated tokens of each case are checked (an exact
// prefix of the reference: greedy decoding does not look ahead).
void CheckParity(const ParityCase& pc, bool use_cache, int threads = 0, int max_tokens = 0) {
  ModelOptions mo;
  if (threads > 0) {
    mo.threads = threads;
    mo.llama.linear.parallel_min_bytes = 0;
  }
  auto model = Model::Load(testing::ModelPath(pc.model), mo);
  REQUIRE(model.ok());
  Model& m = **model;
  auto cache = MakeCache(m.config());
  const int free_before = cache->num_free_blocks();
  nlohmann::json ref =
      nlohmann::json::parse(testing::ReadFile(testing::ReferenceDir() + "/" + pc.reference));
  const int n_predict = ref["n_predict"].get<int>();
  int checked_tokens = 0;
  double max_logprob_diff = 0;
  for (const auto& rc : ref["cases"]) {
    const std::string prompt = rc["prompt"].get<std::string>();
    INFO("model " << pc.model << ", cache " << use_cache << ", prompt '" << prompt << "'");
    std::vector<int32_t> prompt_ids = rc["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> want = rc["generated_ids"].get<std::vector<int32_t>>();
    const bool truncated = max_tokens > 0 && static_cast<int>(want.size()) > max_tokens;
    if (truncated) want.resize(max_tokens);
    CHECK(m.tokenizer().Encode(prompt, m.tokenizer().add_bos()) == prompt_ids);

    DecodingOptions options;
    options.max_new_tokens = truncated ? max_tokens : n_predict;
    options.use_cache = use_cache;
    auto result = Generate(m.lm(), m.tokenizer(), *cache, prompt_ids, options);
    REQUIRE(result.ok());
    REQUIRE(result->hypotheses.size() == 1);
    const Hypothesis& h = result->hypotheses[0];
    REQUIRE(h.ids == want);
    if (!truncated) {
      CHECK(FinishReasonName(result->finish_reason) ==
            (rc["stop_type"] == "eos" ? "eos" : "length"));
    }
    const auto& steps = rc["steps"];
    REQUIRE(steps.size() >= want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double diff = std::abs(h.logprobs[i] - steps[i]["logprob"].get<double>());
      max_logprob_diff = std::max(max_logprob_diff, diff);
      CHECK(diff < 1e-3);
    }
    if (!truncated) CHECK(h.text == rc["text"].get<std::string>());
    checked_tokens += static_cast<int>(want.size());
  }
  CHECK(cache->num_free_blocks() == free_before);
  WARN(pc.model << " cache=" << use_cache << ": " << checked_tokens
                << " tokens identical, max |logprob diff| = " << max_logprob_diff);
}

// Without the KV cache every step runs the whole sequence again; on the quant zoo's exact path
// that is ~40 s of CPU for its 5 x 64 tokens (x3 with the threaded run, more under ASan or at
// the AVX2 level). Its first 16 tokens per case check the same code.
int NoCacheTokens(const ParityCase& pc) { return pc.model.rfind("quant/", 0) == 0 ? 16 : 0; }

const ParityCase kCases[] = {
    {"stories260K.gguf", "stories260K.greedy.json"},
    {"TinyStories-656K-F32.gguf", "TinyStories-656K-F32.greedy.json"},
    {"tinystories-656k-hf", "TinyStories-656K-F32.greedy.json"},
    {"TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q8_0.dequant.greedy.json"},
    // One layer per ggml format (Q4_0 ... IQ4_XS), tied Q6_K embeddings: the exact path widens
    // the blocks to their F32 values, so it must follow llama.cpp on the dequantized twin.
    {"quant/quant-zoo.gguf", "quant/quant-zoo.dequant.greedy.json"},
};

TEST_CASE("greedy decoding matches llama.cpp with the KV cache", "[parity]") {
  for (const ParityCase& pc : kCases) {
    SECTION(pc.model) { CheckParity(pc, /*use_cache=*/true); }
  }
}

TEST_CASE("greedy decoding matches llama.cpp without the KV cache", "[parity]") {
  for (const ParityCase& pc : kCases) {
    SECTION(pc.model) { CheckParity(pc, /*use_cache=*/false, 0, NoCacheTokens(pc)); }
  }
}

TEST_CASE("greedy decoding matches llama.cpp with the ops split across 2 threads", "[parity]") {
  for (const ParityCase& pc : kCases) {
    SECTION(pc.model) {
      CheckParity(pc, /*use_cache=*/true, /*threads=*/2);
      // The threaded no-cache passes split even the tiny models' every op across a team
      // (parallel_min_bytes 0), whose hand-offs dominate on a loaded 2-core machine: the first
      // 16 tokens of each case run every threaded path.
      CheckParity(pc, /*use_cache=*/false, /*threads=*/2, /*max_tokens=*/16);
    }
  }
}

TEST_CASE("generation rejects a prompt that does not fit the context", "[generator]") {
  auto model = Model::Load(testing::ModelPath("TinyStories-656K-F32.gguf"));
  REQUIRE(model.ok());
  auto cache = MakeCache((*model)->config());
  std::vector<int32_t> prompt(500, 5);
  DecodingOptions options;
  options.max_new_tokens = 20;
  Model& m = **model;
  auto result = Generate(m.lm(), m.tokenizer(), *cache, prompt, options);
  REQUIRE(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("512"));
  std::vector<int32_t> bad = {1, 99999};
  auto bad_result = Generate(m.lm(), m.tokenizer(), *cache, bad, options);
  REQUIRE(bad_result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad_result.status().message()), Catch::Contains("99999"));
  CHECK(cache->num_free_blocks() == cache->num_total_blocks());
}

}  // namespace generation_parity_test
}  // namespace textgen

namespace textgen {
namespace generation_parity_test {

// Fast mode on the quant zoo, teacher-forced: each case's prompt plus llama.cpp's generated ids
// (quant-zoo.greedy.json, llama.cpp's own quantized arithmetic) in one Forward with every
// logits row, so a near-tie that flips one greedy token does not end the comparison. Every
// format runs its int8 kernel with activations quantized as llama.cpp does (Q8_0 / Q8_1 blocks
// for the 32-value formats, Q8_K for the K-quants and IQ4_XS); kGemv keeps all rows on those
// decode kernels (the many-row path would widen the weights instead).
TEST_CASE("quant zoo with BF16 compute follows llama.cpp's quantized run", "[parity][quant]") {
  ModelOptions mo;
  mo.llama.linear.compute = ops::LinearCompute::kBf16;
  mo.llama.linear.kernel = ops::LinearKernel::kGemv;
  auto model = Model::Load(testing::ModelPath("quant/quant-zoo.gguf"), mo);
  REQUIRE(model.ok());
  CausalLm& m = (*model)->lm();
  auto cache = MakeCache(m.config());
  const nlohmann::json ref = nlohmann::json::parse(
      testing::ReadFile(testing::ReferenceDir() + "/quant/quant-zoo.greedy.json"));
  const testing::ForcedStats st = testing::TeacherForce(m, *cache, ref);
  const int tokens = st.tokens, argmax_equal = st.argmax_equal;
  const double max_diff = st.max_diff, sum_diff = st.sum_diff;
  WARN("quant-zoo bf16, teacher-forced on llama.cpp's quantized run: argmax equal at "
       << argmax_equal << " of " << tokens << " steps, |logprob diff| max " << max_diff << ", mean "
       << sum_diff / tokens);
  // Measured (AVX-512 VNNI build): 302 of 320 argmax equal, max 0.51, mean 0.066; with only
  // Q8_0 / Q4_K / Q6_K on int8 kernels and the other formats exact (F32), 294, 1.78 and 0.145.
  // The reference's own near-ties (top-1 margins down to 0.004) keep this from being exact.
  CHECK(max_diff < 0.75);
  CHECK(sum_diff / tokens < 0.1);
  CHECK(argmax_equal >= tokens * 93 / 100);
}

}  // namespace generation_parity_test
}  // namespace textgen
