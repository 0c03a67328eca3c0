// The architecture registry (engine/model/arch.cc and the family files): names are unique, each
// family has its docs' rows, and lookups find what the registry lists.
#include <set>
#include <string>

#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "engine/model/arch.h"

namespace arch_registry_test {

using namespace textgen;

TEST_CASE("the registry's names are unique and each family finds itself", "[arch]") {
  std::set<std::string> gguf, hf;
  for (const ArchSpec& a : AllArchitectures()) {
    INFO(a.gguf_arch);
    CHECK(gguf.insert(a.gguf_arch).second);
    CHECK(FindArchByGguf(a.gguf_arch) == &a);
    for (const char* t : a.hf_types) {
      CHECK(hf.insert(t).second);
      CHECK(FindArchByHfType(t) == &a);
    }
    CHECK_FALSE(a.tensors.empty());
    std::set<std::string> names;
    for (const LayerTensorName& n : a.tensors) {
      REQUIRE(n.gguf != nullptr);
      REQUIRE(n.hf != nullptr);
      CHECK(names.insert(n.gguf).second);
    }
    CHECK_FALSE(a.docs.empty());
  }
  CHECK(FindArchByGguf("bert") == nullptr);
  CHECK(FindArchByHfType("t5") == nullptr);
  CHECK(SupportedArchitectures().find("qwen3moe") != std::string::npos);
}

TEST_CASE("the docs' table has one row per ArchDoc, each with three cells", "[arch]") {
  size_t rows = 0;
  for (const ArchSpec& a : AllArchitectures()) rows += a.docs.size();
  const std::string table = ArchitectureTable();
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == rows + 2);  // header and separator
  for (size_t i = 2; i < lines.size(); ++i) {
    INFO(lines[i]);
    // "| a | b | c |" outside code spans; escaped pipes (\|) do not count.
    int cells = 0;
    for (size_t j = 0; j < lines[i].size(); ++j) {
      if (lines[i][j] == '|' && (j == 0 || lines[i][j - 1] != '\\')) ++cells;
    }
    CHECK(cells == 4);
  }
  CHECK(table.find("| `qwen2moe` / — (GGUF only) |") != std::string::npos);
  CHECK(table.find("| `llama` / `llama`, `mistral` |") != std::string::npos);
  CHECK(table.find("| `llama` with experts / `mixtral` |") != std::string::npos);
}

}  // namespace arch_registry_test
