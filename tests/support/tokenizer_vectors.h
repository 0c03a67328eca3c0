// llama.cpp's tokenizer test vectors in ../shared/reference/tokenizer/ (see its README): the
// .inp strings and their expected ids, read as llama.cpp's test-tokenizer-0 reads them. Shared
// by the tokenizer's own test and the end-to-end tests of Tokenize (gRPC) and textgen-run.
#ifndef TEXTGEN_TESTS_SUPPORT_TOKENIZER_VECTORS_H_
#define TEXTGEN_TESTS_SUPPORT_TOKENIZER_VECTORS_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace textgen::testing {

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// One line of whitespace-separated ids per case.
inline std::vector<std::vector<int32_t>> ReadIdLines(const std::string& path) {
  std::istringstream out(ReadFile(path));
  std::vector<std::vector<int32_t>> lines;
  std::string line;
  while (std::getline(out, line)) {
    std::vector<int32_t> ids;
    std::istringstream in(line);
    for (int32_t id; in >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

// The harness splits the .inp file on "\n__ggml_vocab_test__\n": a case is the text between
// separator lines, without the newline that ends its last line (so "\n" cases are written as
// one empty line), and the file ends with a separator. `out_suffix` picks the expected ids:
// ".out" (parse_special off) or ".special.out" (on). `base_name` e.g.
// "ggml-vocab-qwen3.gguf.chat".
inline std::vector<VectorCase> LoadVectorCases(const std::string& base_name,
                                               const std::string& out_suffix = ".out") {
  const std::string base = ReferenceDir() + "/tokenizer/" + base_name;
  std::string inp = ReadFile(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t hit = inp.find(sep, pos);
    REQUIRE(hit != std::string::npos);  // every case is terminated by a separator
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<std::vector<int32_t>> ids = ReadIdLines(base + out_suffix);
  REQUIRE(ids.size() == texts.size());
  std::vector<VectorCase> cases;
  for (size_t i = 0; i < texts.size(); ++i) cases.push_back({texts[i], ids[i]});
  return cases;
}

// The one reference line this tokenizer does not reproduce (llama_cpp_vectors_test.cc says
// why): Qwen3's "</s>" at the end of line 0 of the chat strings with parse_special.
inline bool IsKnownVectorDifference(const std::string& file, size_t line) {
  return file == "ggml-vocab-qwen3.gguf.chat.special.out" && line == 0;
}

}  // namespace textgen::testing

#endif  // TEXTGEN_TESTS_SUPPORT_TOKENIZER_VECTORS_H_
