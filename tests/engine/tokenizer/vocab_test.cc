// Loading vocabularies from GGUF and from Hugging Face tokenizer files.
#include "engine/tokenizer/vocab.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/format/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"
#include "tests/test_util.h"

namespace textgen {
namespace vocab_test {

using testing::GgufTokenizer;
using testing::HfTokenizer656K;
using testing::LoadGgufVocab;

TEST_CASE("GGUF vocab metadata", "[tokenizer][vocab]") {
  SECTION("Llama SPM") {
    VocabData v = LoadGgufVocab(testing::kSpmVocab);
    CHECK(v.model == VocabModel::kLlama);
    CHECK(v.tokens.size() == 32000);
    CHECK(v.scores.size() == 32000);
    CHECK(v.types[0] == TokenType::kUnknown);
    CHECK(v.types[1] == TokenType::kControl);
    CHECK(v.types[3] == TokenType::kByte);
    CHECK(v.bos_id == 1);
    CHECK(v.eos_id == 2);
    CHECK(v.unk_id == 0);
    CHECK(v.add_bos);
    CHECK(v.add_space_prefix);
  }
  SECTION("GPT-2") {
    VocabData v = LoadGgufVocab(testing::kGpt2Vocab);
    CHECK(v.model == VocabModel::kGpt2);
    CHECK(v.pre == "gpt-2");
    CHECK(v.tokens.size() == 50257);
    CHECK(v.merges.size() == 50000);
    CHECK(v.bos_id == 50256);
    CHECK(v.eos_id == 50256);
    CHECK(v.unk_id == -1);
    CHECK_FALSE(v.add_bos);
    CHECK_FALSE(v.add_space_prefix);
  }
  SECTION("stories260K: out-of-range padding id falls back to none") {
    VocabData v = LoadGgufVocab(testing::kStories260K);
    CHECK(v.tokens.size() == 512);
    CHECK(v.pad_id == -1);
    CHECK(v.bos_id == 1);
    CHECK(v.add_bos);  // llama default, key absent
  }
  SECTION("656K: no byte tokens") {
    VocabData v = LoadGgufVocab(testing::kStories656K);
    CHECK(v.tokens.size() == 2048);
    CHECK(v.tokens[1] == "<|start_story|>");
    CHECK(v.unk_id == 0);
    CHECK(v.pad_id == 0);
    for (TokenType t : v.types) CHECK(t != TokenType::kByte);
  }
}

TEST_CASE("GGUF without tokenizer keys is an error", "[tokenizer][vocab]") {
  // The models all have a vocab; a GGUF with none must fail cleanly, not crash.
  const std::string dir = testing::ScratchDir();
  const std::string path = dir + "/empty.gguf";
  // Minimal GGUF v3: magic, version, 0 tensors, 0 metadata entries.
  std::string bytes("GGUF", 4);
  const auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  put(3, 4);
  put(0, 8);
  put(0, 8);
  testing::WriteFile(path, bytes);
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  REQUIRE(gguf.ok());
  absl::StatusOr<VocabData> v = VocabFromGguf(**gguf);
  CHECK(absl::IsNotFound(v.status()));
}

TEST_CASE("HF tokenizer.json maps to the same vocab as the 656K GGUF", "[tokenizer][hf]") {
  const VocabData gguf = LoadGgufVocab(testing::kStories656K);
  const VocabData& hf = HfTokenizer656K().vocab();
  CHECK(hf.model == gguf.model);
  CHECK(hf.tokens == gguf.tokens);
  CHECK(hf.scores == gguf.scores);
  CHECK(hf.types == gguf.types);
  CHECK(hf.bos_id == gguf.bos_id);
  CHECK(hf.eos_id == gguf.eos_id);
  CHECK(hf.unk_id == gguf.unk_id);
  CHECK(hf.pad_id == gguf.pad_id);
  CHECK(hf.add_bos == gguf.add_bos);
  CHECK(hf.add_space_prefix == gguf.add_space_prefix);
}

// Random text drawn from the vocab's own characters plus spaces, newlines, digits, punctuation
// and some characters the vocab lacks.
std::string RandomText(std::mt19937& rng, const Tokenizer& tok) {
  static const std::vector<std::string> extras = {" ",
                                                  " ",
                                                  " ",
                                                  "  ",
                                                  "\n",
                                                  "\n\n",
                                                  "\t",
                                                  ".",
                                                  ",",
                                                  "!",
                                                  "\"",
                                                  "'",
                                                  "3",
                                                  "é",
                                                  "你",
                                                  "\xF0\x9F\x98\x80",
                                                  "#",
                                                  "<|",
                                                  "|>",
                                                  "<unk>",
                                                  "\xE2\x96\x81",
                                                  "~"};
  std::string s;
  const int len = std::uniform_int_distribution<int>(0, 60)(rng);
  for (int i = 0; i < len; ++i) {
    if (rng() % 3 == 0) {
      s += extras[rng() % extras.size()];
    } else {
      // A normal token's text (with ▁ rendered as a space) gives realistic substrings.
      const int32_t id = static_cast<int32_t>(rng() % tok.vocab_size());
      if (tok.token_type(id) == TokenType::kNormal) s += tok.TokenBytes(id);
    }
  }
  return s;
}

TEST_CASE("HF tokenizer encodes like the GGUF tokenizer", "[tokenizer][hf]") {
  const Tokenizer& gguf = GgufTokenizer(testing::kStories656K);
  const Tokenizer& hf = HfTokenizer656K();
  std::vector<std::string> texts;
  for (const char* file : {"TinyStories-656K-F32.greedy.json", "stories260K.greedy.json"}) {
    auto ref = nlohmann::json::parse(testing::ReadFile(testing::ReferenceDir() + "/" + file));
    for (const auto& c : ref["cases"]) {
      texts.push_back(c["prompt"].get<std::string>());
      texts.push_back(c["text"].get<std::string>());
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 500; ++i) texts.push_back(RandomText(rng, gguf));
  for (const std::string& t : texts) {
    INFO("text: [" << t << "]");
    for (bool bos : {false, true}) {
      for (bool special : {false, true}) {
        REQUIRE(hf.Encode(t, bos, special) == gguf.Encode(t, bos, special));
      }
    }
  }
  const std::vector<int32_t> all_ids = gguf.Encode(texts.back(), true);
  CHECK(hf.Decode(all_ids) == gguf.Decode(all_ids));
}

TEST_CASE("656K vocab maps unknown characters to UNK", "[tokenizer][hf]") {
  for (const Tokenizer* tok : {&GgufTokenizer(testing::kStories656K), &HfTokenizer656K()}) {
    const int32_t unk = tok->unk_id();
    REQUIRE(unk == 0);
    const int32_t space = tok->TokenToId("\xE2\x96\x81");
    REQUIRE(space >= 0);
    // One UNK per character the vocab cannot spell (it has no byte tokens).
    CHECK(tok->Encode("\xE4\xBD\xA0\xE5\xA5\xBD", false) == std::vector<int32_t>{space, unk, unk});
    CHECK(tok->Encode("\xF0\x9F\x98\x80", false) == std::vector<int32_t>{space, unk});
    const std::vector<int32_t> mixed = tok->Encode("a#b", false);
    CHECK(std::count(mixed.begin(), mixed.end(), unk) == 1);  // '#' is not in the vocab
    // Ill-formed bytes are unknown too.
    const std::vector<int32_t> bad = tok->Encode("x\xFFy", false);
    CHECK(std::count(bad.begin(), bad.end(), unk) == 1);
    // UNK is a control token here, so it renders as nothing.
    CHECK(tok->Decode({unk}).empty());
  }
}

TEST_CASE("HF loader errors are statuses", "[tokenizer][hf]") {
  SECTION("missing folder") {
    CHECK(absl::IsNotFound(VocabFromHfTokenizerJson("/nonexistent/dir").status()));
  }
  SECTION("malformed files") {
    const std::string dir = testing::ScratchDir();
    const std::vector<std::string> bad = {
        "{not json",
        "[]",
        "{\"model\": 3}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}",  // neither SPM nor byte-level
        "{\"normalizer\": {\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"},"
        " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -5}}}",
        "{\"normalizer\": {\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"},"
        " \"model\": {\"type\": \"BPE\", \"vocab\": {}}}",
    };
    for (const std::string& json : bad) {
      testing::WriteFile(dir + "/tokenizer.json", json);
      absl::StatusOr<VocabData> v = VocabFromHfTokenizerJson(dir);
      INFO(json);
      CHECK_FALSE(v.ok());
    }
  }
}

TEST_CASE("HF ByteLevel tokenizer.json encodes like the GPT-2 GGUF", "[tokenizer][hf]") {
  // Write GPT-2's vocab and merges in Hugging Face form and load them back.
  const VocabData gguf = LoadGgufVocab(testing::kGpt2Vocab);
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < gguf.tokens.size(); ++i) vocab[gguf.tokens[i]] = i;
  nlohmann::json tok = {
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", gguf.merges}}},
  };
  const std::string dir = testing::ScratchDir();
  testing::WriteFile(dir + "/tokenizer.json", tok.dump());
  testing::WriteFile(dir + "/tokenizer_config.json",
                     R"({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})");
  absl::StatusOr<VocabData> hf_vocab = VocabFromHfTokenizerJson(dir);
  REQUIRE(hf_vocab.ok());
  CHECK(hf_vocab->model == VocabModel::kGpt2);
  CHECK(hf_vocab->bos_id == 50256);
  CHECK(hf_vocab->types == gguf.types);
  absl::StatusOr<std::unique_ptr<Tokenizer>> hf = Tokenizer::Create(*std::move(hf_vocab));
  REQUIRE(hf.ok());
  const Tokenizer& ref = GgufTokenizer(testing::kGpt2Vocab);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const std::string t = RandomText(rng, ref);
    INFO("text: [" << t << "]");
    REQUIRE((*hf)->Encode(t, false) == ref.Encode(t, false));
  }
}

}  // namespace vocab_test
}  // namespace textgen

namespace textgen {
namespace vocab_test {

// A GGUF v3 file holding only the given string / string-array / mixed metadata.
struct MetaKv {
  std::string key;
  std::string str;                // type 8 when `strings` is empty and `is_u32` false
  std::vector<std::string> strs;  // type 9 (array of 8) when non-empty
};
std::string GgufWithMetadata(const std::vector<MetaKv>& kvs) {
  std::string bytes("GGUF", 4);
  const auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  const auto put_str = [&](const std::string& s) {
    put(s.size(), 8);
    bytes += s;
  };
  put(3, 4);
  put(0, 8);
  put(kvs.size(), 8);
  for (const MetaKv& kv : kvs) {
    put_str(kv.key);
    if (kv.strs.empty()) {
      put(8, 4);
      put_str(kv.str);
    } else {
      put(9, 4);
      put(8, 4);
      put(kv.strs.size(), 8);
      for (const std::string& s : kv.strs) put_str(s);
    }
  }
  return bytes;
}

absl::Status LoadMeta(const std::vector<MetaKv>& kvs) {
  const std::string path = testing::ScratchDir() + "/meta.gguf";
  testing::WriteFile(path, GgufWithMetadata(kvs));
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  return VocabFromGguf(**gguf).status();
}

TEST_CASE("GGUF tokenizer metadata: unknown pre-tokenizers and wrong types are named",
          "[tokenizer][vocab]") {
  const std::vector<std::string> tokens = {"a", "b", "ab"};
  const std::vector<std::string> merges = {"a b"};
  absl::Status ok = LoadMeta({{"tokenizer.ggml.model", "gpt2", {}},
                              {"tokenizer.ggml.pre", "qwen2", {}},
                              {"tokenizer.ggml.tokens", "", tokens},
                              {"tokenizer.ggml.merges", "", merges}});
  CHECK(ok.ok());
  absl::Status unknown = LoadMeta({{"tokenizer.ggml.model", "gpt2", {}},
                                   {"tokenizer.ggml.pre", "made-up-pre", {}},
                                   {"tokenizer.ggml.tokens", "", tokens}});
  CHECK(unknown.code() == absl::StatusCode::kUnimplemented);
  CHECK(std::string(unknown.message()).find("'made-up-pre'") != std::string::npos);
  absl::Status bad_bos = LoadMeta({{"tokenizer.ggml.model", "gpt2", {}},
                                   {"tokenizer.ggml.pre", "llama-bpe", {}},
                                   {"tokenizer.ggml.tokens", "", tokens},
                                   {"tokenizer.ggml.bos_token_id", "one", {}}});
  CHECK(bad_bos.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad_bos.message()).find("tokenizer.ggml.bos_token_id") != std::string::npos);
  absl::Status bad_tokens = LoadMeta(
      {{"tokenizer.ggml.model", "gpt2", {}}, {"tokenizer.ggml.tokens", "not-an-array", {}}});
  CHECK_FALSE(bad_tokens.ok());
  CHECK(std::string(bad_tokens.message()).find("tokenizer.ggml.tokens") != std::string::npos);
  absl::Status bad_pre = LoadMeta({{"tokenizer.ggml.model", "gpt2", {}},
                                   {"tokenizer.ggml.pre", "", {"x"}},
                                   {"tokenizer.ggml.tokens", "", tokens}});
  CHECK_FALSE(bad_pre.ok());
  CHECK(std::string(bad_pre.message()).find("tokenizer.ggml.pre") != std::string::npos);
}

}  // namespace vocab_test
}  // namespace textgen
