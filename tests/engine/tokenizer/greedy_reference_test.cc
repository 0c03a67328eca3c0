// The prompts and continuations llama.cpp's server produced for the test models: prompt ids
// must equal Encode(prompt, add_bos=true) and the rendered continuation must equal Decode.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace greedy_reference_test {

struct Reference {
  const char* file;   // under ReferenceDir()
  const char* model;  // under ModelsDir()
};

constexpr Reference kReferences[] = {
    {"stories260K.greedy.json", "stories260K.gguf"},
    {"TinyStories-656K-F32.greedy.json", "TinyStories-656K-F32.gguf"},
    {"TinyStories-656K-Q8_0.greedy.json", "TinyStories-656K-Q8_0.gguf"},
    {"TinyStories-656K-Q8_0.dequant.greedy.json", "TinyStories-656K-Q8_0.gguf"},
};

nlohmann::json LoadReference(const char* file) {
  return nlohmann::json::parse(testing::ReadFile(testing::ReferenceDir() + "/" + file));
}

TEST_CASE("Encode matches llama.cpp prompt ids", "[tokenizer][reference]") {
  for (const Reference& ref : kReferences) {
    const Tokenizer& tok = testing::GgufTokenizer(ref.model);
    REQUIRE(tok.add_bos());
    size_t n = 0;
    const nlohmann::json reference = LoadReference(ref.file);
    for (const auto& c : reference["cases"]) {
      const std::string prompt = c["prompt"].get<std::string>();
      const std::vector<int32_t> expected = c["prompt_ids"].get<std::vector<int32_t>>();
      INFO(ref.file << " prompt: [" << prompt << "]");
      CHECK(tok.Encode(prompt, /*add_bos=*/true) == expected);
      // llama-server parses special tokens in prompts; these prompts have none.
      CHECK(tok.Encode(prompt, /*add_bos=*/true, /*parse_special=*/true) == expected);
      ++n;
    }
    CHECK(n == 8);
  }
}

TEST_CASE("Decode matches llama.cpp continuation text", "[tokenizer][reference]") {
  for (const Reference& ref : kReferences) {
    const Tokenizer& tok = testing::GgufTokenizer(ref.model);
    const nlohmann::json reference = LoadReference(ref.file);
    for (const auto& c : reference["cases"]) {
      const std::vector<int32_t> ids = c["generated_ids"].get<std::vector<int32_t>>();
      const std::string text = c["text"].get<std::string>();
      INFO(ref.file << " prompt: [" << c["prompt"].get<std::string>() << "]");
      CHECK(tok.Decode(ids) == text);

      IncrementalDetokenizer detok(tok);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.Add(id);
      streamed += detok.Flush();
      CHECK(streamed == text);
    }
  }
}

TEST_CASE("Continuations keep the leading space of the first piece", "[tokenizer][reference]") {
  // llama-server joins token pieces without llama_detokenize's leading-space strip: after an
  // empty prompt stories260K generates "▁Once", rendered " Once".
  const Tokenizer& tok = testing::GgufTokenizer(testing::kStories260K);
  const int32_t once = tok.TokenToId("\xE2\x96\x81Once");
  REQUIRE(once >= 0);
  CHECK(tok.Decode({tok.bos_id(), once}) == " Once");
  CHECK(tok.Decode({once}) == " Once");
}

}  // namespace greedy_reference_test
}  // namespace textgen
