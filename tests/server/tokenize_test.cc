// The Tokenize RPC with parse_special: the served model's tokenizer as llama.cpp's tokenizer
// tools run it, checked against llama.cpp's vectors (../shared/reference/tokenizer) on a model
// written with the Llama 3.1 vocabulary.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/server/server_test_util.h"
#include "tests/support/tokenizer_vectors.h"

namespace textgen::testing {
namespace tokenize_test {

std::vector<int32_t> TokenizeIds(v1::TextGeneration::Stub& stub, const std::string& text,
                                 bool parse_special, bool add_special = false) {
  grpc::ClientContext ctx;
  v1::TokenizeRequest req;
  req.set_text(text);
  req.set_parse_special(parse_special);
  req.set_add_special(add_special);
  v1::TokenizeResponse resp;
  grpc::Status st = stub.Tokenize(&ctx, req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  CHECK(resp.pieces_size() == resp.ids_size());
  return {resp.ids().begin(), resp.ids().end()};
}

// A tiny random-weight model with `vocab`'s tokenizer (the weights do not matter here).
std::string ModelWithVocab(const std::string& vocab) {
  const char* bin_dir = std::getenv("TEXTGEN_BIN_DIR");
  REQUIRE(bin_dir != nullptr);
  const std::string out = ScratchDir() + "/tokenize-" + vocab + ".gguf";
  CommandResult synth = RunCommand(
      std::string(bin_dir) +
      "/textgen-synth-model --shape custom --arch llama --dim 64 --layers 1 --heads 2 --ffn 64 "
      "--ctx 256 --type q8_0 --vocab " +
      ShellQuote(ModelPath("vocab/" + vocab)) + " --out " + ShellQuote(out) + " 2>&1");
  INFO(synth.out);
  REQUIRE(synth.exit_code == 0);
  return out;
}

TEST_CASE("Tokenize with parse_special gives llama.cpp's ids for special-token texts",
          "[server][tokenize]") {
  const std::string file = "ggml-vocab-llama3.1.gguf";
  ServerProcessOptions o;
  o.model = ModelWithVocab(file);
  ServerProcess server(o);
  auto stub = NewStub(server);
  size_t checked = 0;
  for (const std::string& base : {file, file + ".chat"}) {
    const auto plain = LoadVectorCases(base, ".out");
    const auto special = LoadVectorCases(base, ".special.out");
    for (size_t i = 0; i < special.size(); ++i) {
      INFO(base << " line " << i << ": [" << special[i].text << "]");
      CHECK(TokenizeIds(*stub, special[i].text, /*parse_special=*/true) == special[i].ids);
      CHECK(TokenizeIds(*stub, plain[i].text, /*parse_special=*/false) == plain[i].ids);
      ++checked;
    }
  }
  CHECK(checked >= 50);
  // With add_special, BOS (<|begin_of_text|>, 128000) comes first, once.
  const std::vector<int32_t> ids =
      TokenizeIds(*stub, "<|begin_of_text|>Hi", /*parse_special=*/true, /*add_special=*/true);
  CHECK(ids == std::vector<int32_t>{128000, 128000, 13347});
}

TEST_CASE("Tokenize keeps special-token texts as text unless parse_special is set",
          "[server][tokenize]") {
  auto stub = NewStub(SharedServer());
  const std::vector<int32_t> on = TokenizeIds(*stub, "<s>Once", /*parse_special=*/true);
  const std::vector<int32_t> off = TokenizeIds(*stub, "<s>Once", /*parse_special=*/false);
  REQUIRE(!on.empty());
  CHECK(on[0] == 1);  // stories260K's BOS
  CHECK(off.size() > on.size());
  CHECK(std::find(off.begin(), off.end(), 1) == off.end());
}

}  // namespace tokenize_test
}  // namespace textgen::testing
