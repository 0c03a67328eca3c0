// llama.cpp's own tokenizer test vectors (tests/test-tokenizer-0) for the Llama SPM and GPT-2
// vocabs: every case must give exactly llama.cpp's ids.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace {

using testing::GgufTokenizer;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// The harness splits the .inp file on "\n__ggml_vocab_test__\n": a case is the text between
// separator lines, without the newline that ends its last line (so "\n" cases are written as
// one empty line), and the file ends with a separator.
std::vector<Case> LoadCases(const std::string& vocab_file) {
  const std::string base = testing::ReferenceDir() + "/tokenizer/" + vocab_file;
  std::string inp = testing::ReadFile(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t hit = inp.find(sep, pos);
    REQUIRE(hit != std::string::npos);  // every case is terminated by a separator
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::istringstream out(testing::ReadFile(base + ".out"));
  std::vector<Case> cases;
  std::string line;
  while (std::getline(out, line)) {
    Case c;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  REQUIRE(cases.size() == texts.size());
  for (size_t i = 0; i < cases.size(); ++i) cases[i].text = texts[i];
  return cases;
}

void CheckVectors(const char* vocab_name, const std::string& file) {
  const Tokenizer& tok = GgufTokenizer(vocab_name);
  const std::vector<Case> cases = LoadCases(file);
  CHECK(cases.size() == 46);
  size_t matched = 0;
  for (const Case& c : cases) {
    // test-tokenizer-0 tokenizes with add_special=false, parse_special=true.
    const std::vector<int32_t> got = tok.Encode(c.text, /*add_bos=*/false, /*parse_special=*/true);
    INFO("text: [" << c.text << "]");
    CHECK(got == c.ids);
    if (got == c.ids) ++matched;
  }
  WARN(file << ": " << matched << "/" << cases.size() << " cases match llama.cpp");
  CHECK(matched == cases.size());
}

TEST_CASE("Llama SPM vocab matches llama.cpp test vectors", "[tokenizer][vectors]") {
  CheckVectors(testing::kSpmVocab, "ggml-vocab-llama-spm.gguf");
}

TEST_CASE("GPT-2 vocab matches llama.cpp test vectors", "[tokenizer][vectors]") {
  CheckVectors(testing::kGpt2Vocab, "ggml-vocab-gpt-2.gguf");
}

TEST_CASE("Test vector cases round-trip through Decode", "[tokenizer][vectors]") {
  for (const char* name : {testing::kSpmVocab, testing::kGpt2Vocab}) {
    const Tokenizer& tok = GgufTokenizer(name);
    const bool spm = tok.model() == VocabModel::kLlama;
    for (const Case& c : LoadCases(std::string(name).substr(6))) {
      const std::string decoded = tok.Decode(c.ids);
      INFO(name << " text: [" << c.text << "]");
      // SPM adds one space in front (the dummy prefix); byte-level BPE is lossless.
      CHECK(decoded == (spm && !c.text.empty() ? " " + c.text : c.text));
    }
  }
}

}  // namespace
}  // namespace textgen
