// Hugging Face tokenizer.json folders of real tokenizers (models/hf-tokenizers/) against the GGUF
// of the same vocabulary: same ids on every reference string, same BOS use and EOG set; and
// configurations the reader cannot serve are errors naming them.
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "nlohmann/json.hpp"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace hf_tokenizer_test {

using testing::GgufTokenizer;

const Tokenizer& HfTokenizer(const std::string& name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[name];
  if (slot == nullptr) {
    absl::StatusOr<VocabData> v =
        VocabFromHfTokenizerJson(testing::ModelPath("hf-tokenizers/" + name));
    if (!v.ok()) FAIL(v.status().ToString());
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(v));
    if (!t.ok()) FAIL(t.status().ToString());
    slot = *std::move(t);
  }
  return *slot;
}

std::vector<std::string> ReferenceTexts(const std::string& inp_file) {
  const std::string inp = testing::ReadFile(testing::ReferenceDir() + "/tokenizer/" + inp_file);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0, hit; (hit = inp.find(sep, pos)) != std::string::npos;
       pos = hit + sep.size()) {
    texts.push_back(inp.substr(pos, hit - pos));
  }
  return texts;
}

TEST_CASE("HF tokenizer.json gives the GGUF's ids on every reference string", "[tokenizer][hf]") {
  for (const char* name : {"llama3.1", "qwen3", "gemma3"}) {
    SECTION(name) {
      const Tokenizer& hf = HfTokenizer(name);
      const Tokenizer& gguf = GgufTokenizer(absl::StrCat("vocab/ggml-vocab-", name, ".gguf"));
      size_t n = 0, same = 0;
      for (const char* suffix : {".inp", ".chat.inp"}) {
        for (const std::string& text :
             ReferenceTexts(absl::StrCat("ggml-vocab-", name, ".gguf", suffix))) {
          for (bool parse_special : {false, true}) {
            INFO(name << " parse_special=" << parse_special << " text: [" << text << "]");
            const std::vector<int32_t> a = hf.Encode(text, false, parse_special);
            const std::vector<int32_t> b = gguf.Encode(text, false, parse_special);
            CHECK(a == b);
            ++n;
            same += a == b;
          }
        }
      }
      WARN(name << ": HF == GGUF on " << same << "/" << n << " encodings");
      CHECK(n == 2 * (46 + 10));
    }
  }
}

TEST_CASE("HF and GGUF agree on BOS use, specials and the EOG set", "[tokenizer][hf]") {
  for (const char* name : {"llama3.1", "qwen3", "gemma3"}) {
    SECTION(name) {
      const Tokenizer& hf = HfTokenizer(name);
      const Tokenizer& gguf = GgufTokenizer(absl::StrCat("vocab/ggml-vocab-", name, ".gguf"));
      CHECK(hf.add_bos() == gguf.add_bos());
      if (gguf.add_bos()) CHECK(hf.bos_id() == gguf.bos_id());
      CHECK(hf.eos_id() == gguf.eos_id());
      // The GGUF pads Qwen3 and Gemma 3 with placeholder tokens past the HF vocab.
      std::vector<int32_t> gguf_eog;
      for (int32_t id : gguf.eog_ids()) {
        if (id < hf.vocab_size()) gguf_eog.push_back(id);
      }
      CHECK(hf.eog_ids() == gguf_eog);
    }
  }
  CHECK(HfTokenizer("llama3.1").add_bos());
  CHECK_FALSE(HfTokenizer("qwen3").add_bos());  // Qwen adds none
  CHECK(HfTokenizer("gemma3").add_bos());
}

TEST_CASE("EOG sets hold each family's end tokens", "[tokenizer][eog]") {
  const auto eog_texts = [](const Tokenizer& tok) {
    std::vector<std::string> texts;
    for (int32_t id : tok.eog_ids()) texts.emplace_back(tok.TokenText(id));
    return texts;
  };
  const auto has = [](const std::vector<std::string>& v, const char* t) {
    return std::find(v.begin(), v.end(), t) != v.end();
  };
  {
    const Tokenizer& t = GgufTokenizer("vocab/ggml-vocab-llama3.1.gguf");
    CHECK(t.IsEog(128001));  // <|end_of_text|>
    CHECK(t.IsEog(128009));  // <|eot_id|>, also EOS
    // This tokenizer has no <|eom_id|>: 128008 is a reserved token, not an end.
    CHECK(t.TokenText(128008) == "<|reserved_special_token_4|>");
    CHECK(t.eog_ids() == std::vector<int32_t>{128001, 128009});
    CHECK_FALSE(t.IsEog(128000));  // <|begin_of_text|>
    CHECK_FALSE(t.IsEog(-1));
  }
  {
    const Tokenizer& t = GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
    const std::vector<std::string> e = eog_texts(t);
    INFO(absl::StrJoin(e, " "));
    CHECK(has(e, "<|im_end|>"));
    CHECK(has(e, "<|endoftext|>"));
    CHECK(has(e, "<|fim_pad|>"));  // llama.cpp: FIM pad / repo / file separator end generation
    CHECK(has(e, "<|repo_name|>"));
    CHECK(has(e, "<|file_sep|>"));
    CHECK(has(e, "</s>"));  // llama.cpp's text rule, a normal token in Qwen3
    CHECK_FALSE(has(e, "<|im_start|>"));
    CHECK(t.IsEog(t.eos_id()));
  }
  {
    const Tokenizer& t = GgufTokenizer("vocab/ggml-vocab-gemma3.gguf");
    const std::vector<std::string> e = eog_texts(t);
    INFO(absl::StrJoin(e, " "));
    CHECK(has(e, "<end_of_turn>"));
    CHECK(has(e, "<eos>"));
    CHECK(t.TokenText(t.eos_id()) == "<end_of_turn>");
    CHECK_FALSE(has(e, "<start_of_turn>"));
  }
  {
    const Tokenizer& t = GgufTokenizer("vocab/ggml-vocab-phi-3.gguf");
    const std::vector<std::string> e = eog_texts(t);
    INFO(absl::StrJoin(e, " "));
    CHECK(has(e, "<|end|>"));
    CHECK(has(e, "<|endoftext|>"));
    CHECK(has(e, "</s>"));
  }
  {
    const Tokenizer& t = GgufTokenizer(testing::kGpt2Vocab);
    CHECK(t.eog_ids() == std::vector<int32_t>{50256});
  }
}

TEST_CASE("Qwen3 user-defined tokens match without parse_special, control ones only with it",
          "[tokenizer][special]") {
  for (bool hf : {false, true}) {
    const Tokenizer& t = hf ? HfTokenizer("qwen3") : GgufTokenizer("vocab/ggml-vocab-qwen3.gguf");
    const int32_t think = t.TokenToId("<think>");
    const int32_t im_start = t.TokenToId("<|im_start|>");
    REQUIRE(think >= 0);
    REQUIRE(im_start >= 0);
    CHECK(t.token_type(think) == TokenType::kUserDefined);
    CHECK(t.Encode("<think>", false, false) == std::vector<int32_t>{think});
    CHECK(t.Encode("<|im_start|>", false, true) == std::vector<int32_t>{im_start});
    const std::vector<int32_t> plain = t.Encode("<|im_start|>", false, false);
    CHECK(plain.size() > 1);
    CHECK(std::find(plain.begin(), plain.end(), im_start) == plain.end());
  }
}

// Writes `tok` (and optionally a config) to a scratch folder and loads it.
absl::StatusOr<VocabData> LoadJson(const nlohmann::json& tok, const std::string& config = "") {
  const std::string dir = testing::ScratchDir();
  testing::WriteFile(dir + "/tokenizer.json", tok.dump());
  if (!config.empty()) testing::WriteFile(dir + "/tokenizer_config.json", config);
  return VocabFromHfTokenizerJson(dir);
}

nlohmann::json TinyByteLevel() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int c = 'a'; c <= 'z'; ++c) vocab[std::string(1, static_cast<char>(c))] = c - 'a';
  return {{"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
}

TEST_CASE("Unsupported tokenizer.json configurations are errors naming them", "[tokenizer][hf]") {
  REQUIRE(LoadJson(TinyByteLevel()).ok());
  struct Bad {
    const char* what;
    const char* pointer;  // JSON pointer to replace
    nlohmann::json value;
    const char* expect;  // substring of the message
    absl::StatusCode code;
  };
  const Bad cases[] = {
      {"normalizer type",
       "/normalizer",
       {{"type", "NFKC"}},
       "NFKC",
       absl::StatusCode::kUnimplemented},
      {"pre_tokenizer type",
       "/pre_tokenizer",
       {{"type", "Whitespace"}},
       "Whitespace",
       absl::StatusCode::kUnimplemented},
      {"Split behavior",
       "/pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}},
       "Split",
       absl::StatusCode::kUnimplemented},
      {"Split invert",
       "/pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"Regex", "a"}}},
        {"behavior", "Isolated"},
        {"invert", true}},
       "invert",
       absl::StatusCode::kUnimplemented},
      {"ByteLevel prefix", "/pre_tokenizer/add_prefix_space", true, "add_prefix_space",
       absl::StatusCode::kUnimplemented},
      {"model type", "/model/type", "WordPiece", "WordPiece", absl::StatusCode::kUnimplemented},
      {"vocab id type", "/model/vocab/a", "zero", "model.vocab.a",
       absl::StatusCode::kInvalidArgument},
      {"vocab id range", "/model/vocab/a", -3, "-3", absl::StatusCode::kInvalidArgument},
      {"use_regex type", "/pre_tokenizer/use_regex", "yes", "use_regex",
       absl::StatusCode::kInvalidArgument},
  };
  for (const Bad& b : cases) {
    nlohmann::json tok = TinyByteLevel();
    tok[nlohmann::json::json_pointer(b.pointer)] = b.value;
    absl::StatusOr<VocabData> v = LoadJson(tok);
    INFO(b.what << ": " << v.status());
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().code() == b.code);
    CHECK(std::string(v.status().message()).find(b.expect) != std::string::npos);
    CHECK(std::string(v.status().message()).find("tokenizer.json") != std::string::npos);
  }
  // A Split regex runs as written: Digits / Split compose in order.
  nlohmann::json tok = TinyByteLevel();
  tok["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "b+"}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  absl::StatusOr<VocabData> v = LoadJson(tok);
  REQUIRE(v.ok());
  CHECK(v->pre_regexes == std::vector<std::string>{"b+"});
  // tokenizer_config.json values are checked too.
  absl::StatusOr<VocabData> c = LoadJson(TinyByteLevel(), R"({"add_bos_token": "yes"})");
  REQUIRE_FALSE(c.ok());
  CHECK(std::string(c.status().message()).find("tokenizer_config.json: add_bos_token") !=
        std::string::npos);
  c = LoadJson(TinyByteLevel(), R"({"eos_token": 7})");
  REQUIRE_FALSE(c.ok());
  CHECK(std::string(c.status().message()).find("eos_token = 7") != std::string::npos);
}

}  // namespace hf_tokenizer_test
}  // namespace textgen
