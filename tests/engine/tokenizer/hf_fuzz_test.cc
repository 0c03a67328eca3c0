// Value-type fuzzing of real tokenizer.json / tokenizer_config.json / special_tokens_map.json
// files: each value in turn is replaced with null, a number, a string, an array, an object and a
// bool; loading must return ok or an error status, and an ok vocab must build a tokenizer that
// encodes. Runs under ASan in CI (scripts/test-sanitizers.sh), so a crash or an escaped
// exception fails it.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace textgen {
namespace hf_fuzz_test {

using nlohmann::json;

// Every value's JSON pointer; large maps and arrays contribute only their first `cap` members
// so the run stays short (their members all have the same shape).
void CollectPaths(const json& v, const std::string& at, size_t cap, std::vector<std::string>* out) {
  out->push_back(at);
  size_t i = 0;
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end() && i < cap; ++it, ++i) {
      std::string key = it.key();
      // JSON pointer escaping: '~' -> "~0", '/' -> "~1".
      std::string esc;
      for (char c : key) esc += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
      CollectPaths(it.value(), at + "/" + esc, cap, out);
    }
  } else if (v.is_array()) {
    for (; i < v.size() && i < cap; ++i) CollectPaths(v[i], at + "/" + std::to_string(i), cap, out);
  }
}

const json kReplacements[] = {json(nullptr),         json(123456789),          json(-1),  json("x"),
                              json::array({1, "a"}), json::object({{"k", 1}}), json(true)};

// A real Llama 3.1 tokenizer.json cut down to a few hundred tokens (same structure).
json SmallLlama31() {
  json tok =
      json::parse(testing::ReadFile(testing::ModelPath("hf-tokenizers/llama3.1/tokenizer.json")));
  json vocab = json::object();
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it) {
    if (it.value().get<int64_t>() < 300) vocab[it.key()] = it.value();
  }
  tok["model"]["vocab"] = vocab;
  json merges = json::array();
  for (size_t i = 0; i < 40; ++i) merges.push_back(tok["model"]["merges"][i]);
  tok["model"]["merges"] = merges;
  json added = json::array();
  for (size_t i = 0; i < 4; ++i) {
    json a = tok["added_tokens"][i];
    a["id"] = 300 + static_cast<int>(i);
    added.push_back(a);
  }
  tok["added_tokens"] = added;
  return tok;
}

// Loads (files) from a scratch folder; returns whether it loaded.
bool LoadAndUse(const std::string& dir) {
  absl::StatusOr<VocabData> v = VocabFromHfTokenizerJson(dir);
  if (!v.ok()) {
    CHECK_FALSE(v.status().message().empty());
    return false;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(v));
  if (!t.ok()) return false;
  for (bool special : {false, true}) {
    (*t)->Encode("Hello world <|begin_of_text|> 123 \xC3\xA9\n\n  x", true, special);
  }
  return true;
}

void Fuzz(const char* what, const json& tok, const json& config, const json& special_map,
          int which) {
  const json& target = which == 0 ? tok : which == 1 ? config : special_map;
  const char* file = which == 0   ? "/tokenizer.json"
                     : which == 1 ? "/tokenizer_config.json"
                                  : "/special_tokens_map.json";
  std::vector<std::string> paths;
  CollectPaths(target, "", 12, &paths);
  const std::string dir = testing::ScratchDir();
  testing::WriteFile(dir + "/tokenizer.json", tok.dump());
  if (!config.is_null()) testing::WriteFile(dir + "/tokenizer_config.json", config.dump());
  if (!special_map.is_null()) {
    testing::WriteFile(dir + "/special_tokens_map.json", special_map.dump());
  }
  REQUIRE(LoadAndUse(dir));  // the unmutated files load
  int ok = 0, errors = 0;
  for (const std::string& path : paths) {
    for (const json& r : kReplacements) {
      json mutated = target;
      mutated[json::json_pointer(path)] = r;
      testing::WriteFile(dir + file, mutated.dump());
      INFO(what << file << " " << (path.empty() ? "(root)" : path) << " = " << r.dump());
      (LoadAndUse(dir) ? ok : errors)++;
    }
  }
  testing::WriteFile(dir + file, target.dump());
  WARN(what << file << ": " << paths.size() << " values x " << std::size(kReplacements)
            << " types: " << ok << " loaded, " << errors << " errors");
  CHECK(errors > 0);  // the mutations reached checked values
}

TEST_CASE("tokenizer.json value-type fuzz never crashes (Llama 3.1, cut down)",
          "[tokenizer][hf][fuzz]") {
  const json tok = SmallLlama31();
  const json config = json::parse(
      testing::ReadFile(testing::ModelPath("hf-tokenizers/llama3.1/tokenizer_config.json")));
  Fuzz("llama3.1", tok, config, json(), 0);
  Fuzz("llama3.1", tok, config, json(), 1);
}

TEST_CASE("tokenizer.json value-type fuzz never crashes (TinyStories SentencePiece-style)",
          "[tokenizer][hf][fuzz]") {
  const std::string dir = testing::ModelPath("tinystories-656k-hf");
  const json tok = json::parse(testing::ReadFile(dir + "/tokenizer.json"));
  const json config = json::parse(testing::ReadFile(dir + "/tokenizer_config.json"));
  const json special_map = json::parse(testing::ReadFile(dir + "/special_tokens_map.json"));
  Fuzz("tinystories", tok, config, special_map, 0);
  Fuzz("tinystories", tok, config, special_map, 1);
  Fuzz("tinystories", tok, config, special_map, 2);
}

}  // namespace hf_fuzz_test
}  // namespace textgen
