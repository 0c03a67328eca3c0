// llama.cpp's tokenizer test vectors (tests/test-tokenizer-0 and the chat-like strings in
// reference/tokenizer/) for every vocab in models/vocab/: every case must give exactly
// llama.cpp's ids, with parse_special off (.out) and on (.special.out).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/support/tokenizer_vectors.h"
#include "tests/test_util.h"

namespace textgen {
namespace llama_cpp_vectors_test {

using testing::GgufTokenizer;
using testing::LoadVectorCases;
using testing::ReadIdLines;
using Case = testing::VectorCase;

// The one reference line we do not reproduce, and why. Qwen3's "</s>" is a normal vocab token
// that llama.cpp's text rule makes control; the reference llama.cpp then splits it out of text
// with parse_special in lines 8 and 9 (after another special token split the text) but not at
// the end of line 0, where no other special token occurs. We split it in all three (as current
// llama.cpp's tokenizer_st_partition reads); line 0 is checked to differ only there.
struct KnownDifference {
  const char* file;
  size_t line;
  std::vector<int32_t> ours;
};
const KnownDifference kKnownDifferences[] = {
    {"ggml-vocab-qwen3.gguf.chat.special.out",
     0,
     {44047, 30768, 64462, 60, 21927, 11, 1246, 525, 498, 30, 64928, 64462, 60, 358, 1079, 6915, 13,
      128247}},
};

// Every case of `base_name` + `out_suffix` must give exactly llama.cpp's ids; returns the
// number of cases (a file that went missing or empty fails instead of passing vacuously).
size_t CheckVectors(const Tokenizer& tok, const std::string& base_name,
                    const std::string& out_suffix, bool parse_special) {
  const std::vector<Case> cases = LoadVectorCases(base_name, out_suffix);
  CHECK(cases.size() >= 10);
  size_t matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::vector<int32_t> got = tok.Encode(c.text, /*add_bos=*/false, parse_special);
    INFO(base_name << out_suffix << " line " << i << " text: [" << c.text << "]");
    const KnownDifference* known = nullptr;
    for (const KnownDifference& k : kKnownDifferences) {
      if (base_name + out_suffix == k.file && i == k.line) known = &k;
    }
    if (known != nullptr) {
      CHECK(got != c.ids);
      CHECK(got == known->ours);
      continue;
    }
    CHECK(got == c.ids);
    if (got == c.ids) ++matched;
  }
  WARN(base_name << out_suffix << ": " << matched << "/" << cases.size()
                 << " cases match llama.cpp");
  return cases.size();
}

// Every vocab in models/vocab/ with llama.cpp's ids for it in reference/tokenizer/.
const char* const kAllVocabs[] = {
    "llama-spm", "gpt-2",  "deepseek-coder", "deepseek-llm", "falcon", "mpt",
    "phi-3",     "refact", "starcoder",      "llama3.1",     "qwen3",  "gemma3",
};

TEST_CASE("Every vocab matches llama.cpp's test vectors, parse_special off and on",
          "[tokenizer][vectors]") {
  for (const char* name : kAllVocabs) {
    const std::string file = absl::StrCat("ggml-vocab-", name, ".gguf");
    SECTION(file) {
      const Tokenizer& tok = GgufTokenizer("vocab/" + file);
      CheckVectors(tok, file, ".out", /*parse_special=*/false);
      CheckVectors(tok, file, ".special.out", /*parse_special=*/true);
    }
  }
}

TEST_CASE("Every vocab matches llama.cpp on chat-like strings full of special-token texts",
          "[tokenizer][vectors]") {
  for (const char* name : kAllVocabs) {
    const std::string file = absl::StrCat("ggml-vocab-", name, ".gguf");
    SECTION(file) {
      const Tokenizer& tok = GgufTokenizer("vocab/" + file);
      CheckVectors(tok, file + ".chat", ".out", /*parse_special=*/false);
      CheckVectors(tok, file + ".chat", ".special.out", /*parse_special=*/true);
      // The chat files exist to tell the two modes apart: some line must differ.
      CHECK(ReadIdLines(testing::ReferenceDir() + "/tokenizer/" + file + ".chat.out") !=
            ReadIdLines(testing::ReferenceDir() + "/tokenizer/" + file + ".chat.special.out"));
    }
  }
}

TEST_CASE("Test vector cases round-trip through Decode", "[tokenizer][vectors]") {
  for (const char* name : {testing::kSpmVocab, testing::kGpt2Vocab}) {
    const Tokenizer& tok = GgufTokenizer(name);
    const bool spm = tok.model() == VocabModel::kLlama;
    for (const Case& c : LoadVectorCases(std::string(name).substr(6))) {
      const std::string decoded = tok.Decode(c.ids);
      INFO(name << " text: [" << c.text << "]");
      // SPM adds one space in front (the dummy prefix); byte-level BPE is lossless.
      CHECK(decoded == (spm && !c.text.empty() ? " " + c.text : c.text));
    }
  }
}

}  // namespace llama_cpp_vectors_test
}  // namespace textgen
