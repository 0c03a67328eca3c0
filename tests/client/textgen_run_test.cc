// End-to-end tests of the textgen-run binary: flags, JSON output, errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/support/tokenizer_vectors.h"
#include "tests/test_util.h"

namespace textgen {
namespace textgen_run_test {

using RunResult = testing::CommandResult;
using testing::ShellQuote;

RunResult Run(const std::string& args, bool with_stderr = false) {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  // Exact arithmetic (comparable with llama.cpp's references) unless the test picks one.
  const std::string compute = args.find("--compute") == std::string::npos ? "--compute f32 " : "";
  return testing::RunCommand(std::string(bin_dir) + "/textgen-run " + compute + args +
                             (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

TEST_CASE("textgen-run tells the demo story", "[cli]") {
  RunResult r = Run("--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) +
                    " --prompt 'Once upon a time' --max-new-tokens 40");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("Once upon a time, there was a little girl named Lily. She "
                                      "loved to play outside in the park."));
}

TEST_CASE("textgen-run's default fast arithmetic tells a coherent story", "[cli]") {
  for (const char* compute : {"bf16", "f32"}) {
    RunResult r = Run("--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) +
                      " --compute " + compute + " --prompt 'Once upon a time' --max-new-tokens 20");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("Once upon a time, there was a little"));
  }
  CHECK(Run("--compute f16 --prompt x", true).out.find("--compute") != std::string::npos);
}

TEST_CASE("textgen-run --kv-type picks the KV cache element type", "[cli]") {
  const std::string model = "--model " + ShellQuote(testing::ModelPath("stories260K.gguf"));
  // Whatever the type, the demo story starts the same (no near tie in its first tokens).
  for (const char* kv : {"f32", "bf16", "auto"}) {
    for (const char* compute : {"f32", "bf16"}) {
      INFO("--kv-type " << kv << " --compute " << compute);
      RunResult r = Run(model + " --compute " + compute + " --kv-type " + kv +
                        " --prompt 'Once upon a time' --max-new-tokens 20");
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::StartsWith("Once upon a time, there was a little"));
    }
  }
  RunResult bad = Run("--kv-type f16 --prompt x", true);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--kv-type: expected f32, bf16 or auto"));
  CHECK_THAT(Run("--help").out, Catch::Contains("--kv-type f32|bf16|auto"));
}

TEST_CASE("textgen-run --json matches the reference, with and without cache", "[cli]") {
  nlohmann::json ref = nlohmann::json::parse(
      testing::ReadFile(testing::ReferenceDir() + "/TinyStories-656K-F32.greedy.json"));
  const auto& c = ref["cases"][1];
  for (const char* extra : {"", " --no-cache"}) {
    RunResult r = Run("--model " + ShellQuote(testing::ModelPath("TinyStories-656K-F32.gguf")) +
                      " --prompt " + ShellQuote(c["prompt"].get<std::string>()) +
                      " --max-new-tokens 96 --json" + extra);
    REQUIRE(r.exit_code == 0);
    nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["prompt_ids"] == c["prompt_ids"]);
    CHECK(j["generated_ids"] == c["generated_ids"]);
    CHECK(j["text"] == c["text"]);
    CHECK(j["finish_reason"] == "length");
    REQUIRE(j["logprobs"].size() == c["steps"].size());
    for (size_t i = 0; i < c["steps"].size(); ++i) {
      CHECK(std::abs(j["logprobs"][i].get<double>() - c["steps"][i]["logprob"].get<double>()) <
            1e-3);
    }
  }
}

TEST_CASE("textgen-run --prompt-ids and eos finish", "[cli]") {
  nlohmann::json ref = nlohmann::json::parse(
      testing::ReadFile(testing::ReferenceDir() + "/TinyStories-656K-F32.greedy.json"));
  const auto& c = ref["cases"][2];  // ends with EOS after 5 tokens
  std::string ids;
  for (const auto& id : c["prompt_ids"]) ids += (ids.empty() ? "" : ",") + id.dump();
  RunResult r = Run("--model " + ShellQuote(testing::ModelPath("TinyStories-656K-F32.gguf")) +
                    " --prompt-ids " + ids + " --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["generated_ids"] == c["generated_ids"]);
  CHECK(j["finish_reason"] == "eos");
}

TEST_CASE("textgen-run --tokenize works on a vocab-only GGUF", "[cli]") {
  RunResult r = Run("--model " + ShellQuote(testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf")) +
                    " --tokenize 'Hello world' --no-bos --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["ids"] == nlohmann::json::array({15043, 3186}));
  CHECK(j["pieces"] == nlohmann::json::array({"\u2581Hello", "\u2581world"}));
}

TEST_CASE("textgen-run --tokenize --parse-special gives llama.cpp's parse_special ids", "[cli]") {
  // The chat-like strings full of special-token texts, in three tokenizer families: with
  // --parse-special they give llama.cpp's .special.out ids, without it its .out ids (every
  // string where the two differ, and the first two of the rest).
  for (const std::string vocab : {"llama3.1", "qwen3", "gemma3", "llama-spm"}) {
    const std::string file = "ggml-vocab-" + vocab + ".gguf";
    const std::string model = " --model " + ShellQuote(testing::ModelPath("vocab/" + file));
    const auto plain = testing::LoadVectorCases(file + ".chat", ".out");
    const auto special = testing::LoadVectorCases(file + ".chat", ".special.out");
    int differing = 0;
    for (size_t i = 0; i < special.size(); ++i) {
      const bool differs = plain[i].ids != special[i].ids;
      differing += differs;
      if (!differs && i >= 2) continue;
      INFO(file << " line " << i << ": [" << special[i].text << "]");
      const std::string text = " --tokenize " + ShellQuote(special[i].text) + " --no-bos --json";
      RunResult on = Run(model + text + " --parse-special");
      RunResult off = Run(model + text);
      REQUIRE(on.exit_code == 0);
      REQUIRE(off.exit_code == 0);
      CHECK(nlohmann::json::parse(off.out)["ids"] == plain[i].ids);
      if (testing::IsKnownVectorDifference(file + ".chat.special.out", i)) continue;
      CHECK(nlohmann::json::parse(on.out)["ids"] == special[i].ids);
    }
    CHECK(differing >= 1);
  }
  CHECK(Run("--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) +
                " --prompt a --parse-special",
            true)
            .out.find("--parse-special works only with --tokenize") != std::string::npos);
}

TEST_CASE("textgen-run reports bad input clearly", "[cli]") {
  const std::string model = " --model " + ShellQuote(testing::ModelPath("stories260K.gguf"));
  CHECK(Run(model).exit_code == 2);  // neither prompt nor ids
  CHECK(Run(model + " --prompt a --prompt-ids 1").exit_code == 2);
  CHECK(Run(model + " --prompt-ids 1,x").exit_code == 2);
  CHECK(Run(model + " --prompt-ids 1,100000").exit_code == 2);
  CHECK(Run(model + " --prompt a --max-new-tokens -3").exit_code == 2);
  CHECK(Run("--model /nonexistent.gguf --prompt a").exit_code == 2);
  CHECK(Run(model + " --bogus").exit_code == 2);
}

TEST_CASE("textgen-run beam search prints hypotheses", "[cli]") {
  RunResult r = Run("--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) +
                    " --prompt 'Once upon a time' --max-new-tokens 30 --beams 4 --num-return 3"
                    " --length-penalty 0.5 --early-stopping never --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["hypotheses"].size() == 3);
  CHECK(j["generated_ids"] == j["hypotheses"][0]["ids"]);
  CHECK(j["text"] == j["hypotheses"][0]["text"]);
  for (const auto& h : j["hypotheses"]) {
    CHECK(h.contains("score"));
    CHECK(h.contains("cum_logprob"));
    CHECK((h["finish_reason"] == "eos" || h["finish_reason"] == "length"));
  }
  CHECK(j["hypotheses"][0]["score"].get<double>() >= j["hypotheses"][2]["score"].get<double>());
}

TEST_CASE("textgen-run beam search with a stop string", "[cli]") {
  RunResult r =
      Run("--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) +
          " --prompt 'Once upon a time' --max-new-tokens 60 --beams 4 --stop mommy --json");
  REQUIRE(r.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["finish_reason"] == "stop_sequence");
  CHECK(j["text"].get<std::string>().find("mommy") == std::string::npos);
  CHECK(j["text"] == j["hypotheses"][0]["text"]);
  CHECK(j["hypotheses"][0]["finish_reason"] == "stop_sequence");
}

TEST_CASE("textgen-run sampling, stop strings, top logprobs and the sliding window", "[cli]") {
  const std::string model =
      "--model " + ShellQuote(testing::ModelPath("TinyStories-656K-F32.gguf"));
  const std::string sample =
      model +
      " --prompt 'Once upon a time' --max-new-tokens 40 --temperature 0.8 --top-k 40"
      " --top-p 0.9 --min-p 0.05 --repetition-penalty 1.1 --seed 42 --json";
  RunResult a = Run(sample), b = Run(sample);
  REQUIRE(a.exit_code == 0);
  CHECK(nlohmann::json::parse(a.out)["generated_ids"] ==
        nlohmann::json::parse(b.out)["generated_ids"]);

  RunResult s = Run(model + " --prompt 'Once upon a time' --stop ',' --json --top-logprobs 3");
  REQUIRE(s.exit_code == 0);
  nlohmann::json js = nlohmann::json::parse(s.out);
  CHECK(js["finish_reason"] == "stop_sequence");
  CHECK(js["text"].get<std::string>().find(',') == std::string::npos);
  REQUIRE(js["tokens"].size() > 0);
  CHECK(js["tokens"][0]["top_logprobs"].size() == 3);

  RunResult w = Run(model +
                    " --prompt 'Once upon a time' --max-new-tokens 1200 --ignore-eos"
                    " --context-overflow slide --n-keep 1 --json");
  REQUIRE(w.exit_code == 0);
  nlohmann::json jw = nlohmann::json::parse(w.out);
  CHECK(jw["generated_ids"].size() == 1200);
  CHECK(jw["usage"]["context_shifts"].get<int>() > 0);
}

TEST_CASE("textgen-run rejects bad decoding parameters naming them", "[cli]") {
  const std::string base =
      "--model " + ShellQuote(testing::ModelPath("stories260K.gguf")) + " --prompt a ";
  const std::pair<const char*, const char*> cases[] = {
      {"--beams 0", "num_beams"},
      {"--beams 17", "num_beams"},
      {"--beams 4 --num-return 5", "num_return_sequences"},
      {"--temperature 0.5 --top-p 1.5", "top_p"},
      {"--temperature -1", "temperature"},
      {"--top-logprobs 21", "top_logprobs"},
      {"--max-new-tokens 5000", "context"},
      {"--early-stopping sometimes", "early-stopping"},
      {"--context-overflow wrap", "context-overflow"},
  };
  for (const auto& [flags, name] : cases) {
    RunResult r = Run(base + flags, /*with_stderr=*/true);
    INFO(flags << " -> " << r.out);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(name));
  }
}

}  // namespace textgen_run_test
}  // namespace textgen
