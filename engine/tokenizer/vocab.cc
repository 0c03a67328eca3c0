#include "engine/tokenizer/vocab.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

using nlohmann::json;

constexpr char kKeyPrefix[] = "tokenizer.ggml.";

std::string Key(const char* name) { return absl::StrCat(kKeyPrefix, name); }

// Reads an optional integer special-token id; keeps `*id` (the default) when the key is absent
// or the value is not a valid id, as llama.cpp does (e.g. stories260K stores pad = 2^32-1).
absl::Status ReadSpecialId(const GgufFile& gguf, const char* name, size_t n_tokens, int32_t* id) {
  absl::StatusOr<int64_t> v = gguf.GetInt(Key(name));
  if (absl::IsNotFound(v.status())) return absl::OkStatus();
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", Key(name), ": ", v.status().message()));
  }
  if (*v >= 0 && static_cast<uint64_t>(*v) < n_tokens) *id = static_cast<int32_t>(*v);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& gguf, const char* name, bool* value) {
  absl::StatusOr<bool> v = gguf.GetBool(Key(name));
  if (absl::IsNotFound(v.status())) return absl::OkStatus();
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", Key(name), ": ", v.status().message()));
  }
  *value = *v;
  return absl::OkStatus();
}

TokenType TokenTypeFromInt(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(TokenType::kByte)) return TokenType::kUndefined;
  return static_cast<TokenType>(v);
}

bool IsByteTokenText(const std::string& s) {
  const auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  return s.size() == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && hex(s[3]) && hex(s[4]) &&
         s[5] == '>';
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading ", path));
  return ss.str();
}

// Parses a JSON file; a missing optional file gives a null value.
absl::StatusOr<json> ReadJsonFile(const std::string& path, bool required) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) {
    if (!required && absl::IsNotFound(text.status())) return json();
    return text.status();
  }
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", path));
  return j;
}

// HF stores special tokens either as a string or as an AddedToken object {"content": ...}.
std::string SpecialTokenText(const json& config, const char* name) {
  if (!config.is_object() || !config.contains(name)) return "";
  const json& v = config[name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

// Calls `fn` on a normalizer/pre-tokenizer and, for "Sequence", on each member.
template <typename Fn>
void ForEachComponent(const json& component, const char* list_key, Fn fn) {
  if (!component.is_object()) return;
  if (component.value("type", "") == "Sequence" && component.contains(list_key) &&
      component[list_key].is_array()) {
    for (const json& c : component[list_key]) ForEachComponent(c, list_key, fn);
    return;
  }
  fn(component);
}

absl::StatusOr<VocabData> ParseHfTokenizer(const json& tok, const json& config,
                                           const json& special_map) {
  const json& model = tok.at("model");
  if (model.value("type", "BPE") != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.json model type ", model.value("type", ""), " is not BPE"));
  }
  VocabData v;

  // Which family: SentencePiece-style ("▁" for spaces) or byte-level.
  bool metaspace = false, byte_level = false, prefix = false;
  const std::string kSpm = "\xE2\x96\x81";  // U+2581 '▁'
  ForEachComponent(tok.value("normalizer", json()), "normalizers", [&](const json& n) {
    const std::string type = n.value("type", "");
    if (type == "Prepend" && n.value("prepend", "") == kSpm) metaspace = prefix = true;
    if (type == "Replace" && n.value("content", "") == kSpm) metaspace = true;
  });
  ForEachComponent(tok.value("pre_tokenizer", json()), "pretokenizers", [&](const json& p) {
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") byte_level = true;
    if (type == "Metaspace") {
      metaspace = true;
      // Older files say add_prefix_space, newer ones prepend_scheme.
      if (p.value("add_prefix_space", false) || p.value("prepend_scheme", "never") != "never") {
        prefix = true;
      }
    }
  });
  if (metaspace == byte_level) {
    return absl::UnimplementedError(
        "tokenizer.json is neither SentencePiece-style (Metaspace) nor ByteLevel BPE");
  }
  v.model = metaspace ? VocabModel::kLlama : VocabModel::kGpt2;
  v.add_space_prefix = metaspace && prefix;
  v.add_bos = metaspace;  // llama.cpp's default for each family; the config may override

  // Token table: model.vocab plus added_tokens (which may extend or override it).
  absl::flat_hash_map<std::string, int32_t> ids;
  std::vector<std::pair<int64_t, std::string>> entries;
  for (const auto& [text, id] : model.at("vocab").items()) {
    entries.emplace_back(id.get<int64_t>(), text);
  }
  std::vector<std::pair<int64_t, bool>> added;  // id, special
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      entries.emplace_back(a.at("id").get<int64_t>(), a.at("content").get<std::string>());
      added.emplace_back(a.at("id").get<int64_t>(), a.value("special", false));
    }
  }
  int64_t n = 0;
  for (const auto& [id, text] : entries) {
    if (id < 0 || id >= (int64_t{1} << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad token id ", id));
    }
    n = std::max(n, id + 1);
  }
  v.tokens.resize(n);
  v.types.assign(n, TokenType::kUnused);
  std::vector<bool> present(n, false);
  for (const auto& [id, text] : entries) {
    v.tokens[id] = text;
    v.types[id] = IsByteTokenText(text) ? TokenType::kByte : TokenType::kNormal;
    present[id] = true;
    ids[text] = static_cast<int32_t>(id);
  }
  for (int64_t i = 0; i < n; ++i) {
    // Gaps get placeholder names like llama.cpp's converter writes.
    if (!present[i]) v.tokens[i] = absl::StrCat("[PAD", i, "]");
  }
  for (const auto& [id, special] : added) {
    if (v.types[id] != TokenType::kByte) {
      v.types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
    }
  }

  const auto lookup = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  };
  const auto special = [&](const char* name) {
    std::string text = SpecialTokenText(config, name);
    if (text.empty()) text = SpecialTokenText(special_map, name);
    return lookup(text);
  };
  v.bos_id = special("bos_token");
  v.eos_id = special("eos_token");
  v.pad_id = special("pad_token");
  v.unk_id = special("unk_token");
  if (v.unk_id < 0 && model.contains("unk_token") && model["unk_token"].is_string()) {
    v.unk_id = lookup(model["unk_token"].get<std::string>());
  }
  // The converter marks all of HF's special ids as control tokens.
  for (int32_t id : {v.bos_id, v.eos_id, v.pad_id, v.unk_id}) {
    if (id >= 0) v.types[id] = TokenType::kControl;
  }
  if (config.is_object() && config.contains("add_bos_token") &&
      config["add_bos_token"].is_boolean()) {
    v.add_bos = config["add_bos_token"].get<bool>();
  }

  if (v.model == VocabModel::kLlama) {
    // llama.cpp's LlamaHfVocab gives every token score -1000; equal scores make the SPM merge
    // loop pair leftmost first, and matching that is what makes ids equal to the GGUF's.
    v.scores.assign(n, -1000.0f);
  } else {
    v.pre = "gpt-2";
    if (model.contains("merges") && model["merges"].is_array()) {
      for (const json& m : model["merges"]) {
        if (m.is_string()) {
          v.merges.push_back(m.get<std::string>());
        } else if (m.is_array() && m.size() == 2) {  // newer format: ["left", "right"]
          v.merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
        } else {
          return absl::InvalidArgumentError("tokenizer.json: malformed merge entry");
        }
      }
    }
  }
  return v;
}

}  // namespace

absl::Status ValidateVocab(const VocabData& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return absl::InvalidArgumentError("vocab has no tokens");
  if (n > (size_t{1} << 30)) return absl::InvalidArgumentError("vocab too large");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab has ", n, " tokens but ", vocab.scores.size(), " scores"));
  }
  if (!vocab.types.empty() && vocab.types.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab has ", n, " tokens but ", vocab.types.size(), " token types"));
  }
  if (!vocab.lstrip.empty() && vocab.lstrip.size() != n) {
    return absl::InvalidArgumentError("vocab lstrip flags do not match its tokens");
  }
  if (!vocab.rstrip.empty() && vocab.rstrip.size() != n) {
    return absl::InvalidArgumentError("vocab rstrip flags do not match its tokens");
  }
  for (auto [name, id] :
       {std::pair{"bos", vocab.bos_id}, std::pair{"eos", vocab.eos_id},
        std::pair{"unk", vocab.unk_id}, std::pair{"pad", vocab.pad_id},
        std::pair{"eot", vocab.eot_id}, std::pair{"eom", vocab.eom_id},
        std::pair{"fim_pad", vocab.fim_pad_id}, std::pair{"fim_rep", vocab.fim_rep_id},
        std::pair{"fim_sep", vocab.fim_sep_id}}) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " id ", id, " out of range"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VocabData> VocabFromGguf(const GgufFile& gguf) {
  VocabData v;
  TG_ASSIGN_OR_RETURN(const std::string model, gguf.GetString(Key("model")));
  absl::StatusOr<std::string> pre = gguf.GetString(Key("pre"));
  if (pre.ok()) {
    v.pre = *pre;
  } else if (!absl::IsNotFound(pre.status())) {
    return pre.status();
  }
  if (model == "llama") {
    v.model = VocabModel::kLlama;
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else if (model == "gpt2") {
    v.model = VocabModel::kGpt2;
    // llama.cpp falls back to its "default" split when the key is missing.
    absl::StatusOr<PreTokenizerTraits> traits =
        PreTokenizer::TraitsForName(v.pre.empty() ? "default" : v.pre);
    if (!traits.ok()) {
      return absl::UnimplementedError(
          absl::StrCat(traits.status().message(), " (", Key("pre"), ") in ", gguf.path()));
    }
    v.ignore_merges = traits->ignore_merges;
    v.add_bos = traits->ignore_merges;  // llama.cpp: the Llama 3 family adds BOS by default
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported tokenizer model '", model, "' in ", gguf.path()));
  }

  TG_ASSIGN_OR_RETURN(v.tokens, gguf.GetStringArray(Key("tokens")));
  const size_t n = v.tokens.size();
  absl::StatusOr<std::vector<double>> scores = gguf.GetFloatArray(Key("scores"));
  if (scores.ok()) {
    v.scores.assign(scores->begin(), scores->end());
  } else if (!absl::IsNotFound(scores.status())) {
    return scores.status();
  }
  absl::StatusOr<std::vector<int64_t>> types = gguf.GetIntArray(Key("token_type"));
  if (types.ok()) {
    v.types.reserve(types->size());
    for (int64_t t : *types) v.types.push_back(TokenTypeFromInt(t));
  } else if (!absl::IsNotFound(types.status())) {
    return types.status();
  }
  absl::StatusOr<std::vector<std::string>> merges = gguf.GetStringArray(Key("merges"));
  if (merges.ok()) {
    v.merges = *std::move(merges);
  } else if (!absl::IsNotFound(merges.status())) {
    return merges.status();
  }
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "bos_token_id", n, &v.bos_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "eos_token_id", n, &v.eos_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "unknown_token_id", n, &v.unk_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "padding_token_id", n, &v.pad_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "eot_token_id", n, &v.eot_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "eom_token_id", n, &v.eom_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "fim_pad_token_id", n, &v.fim_pad_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "fim_rep_token_id", n, &v.fim_rep_id));
  TG_RETURN_IF_ERROR(ReadSpecialId(gguf, "fim_sep_token_id", n, &v.fim_sep_id));
  absl::StatusOr<std::string> name = gguf.GetString("general.name");
  if (name.ok()) {
    const std::string lower = absl::AsciiStrToLower(*name);
    v.phi3_rstrip =
        lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos;
  }
  TG_RETURN_IF_ERROR(ReadOptionalBool(gguf, "add_bos_token", &v.add_bos));
  TG_RETURN_IF_ERROR(ReadOptionalBool(gguf, "add_space_prefix", &v.add_space_prefix));
  // Defaults can point past a tiny vocab; drop them rather than fail.
  for (int32_t* id : {&v.bos_id, &v.eos_id, &v.unk_id, &v.pad_id}) {
    if (*id >= static_cast<int64_t>(n)) *id = -1;
  }
  absl::Status valid = ValidateVocab(v);
  if (!valid.ok())
    return absl::InvalidArgumentError(absl::StrCat(valid.message(), " in ", gguf.path()));
  return v;
}

absl::StatusOr<VocabData> VocabFromHfTokenizerJson(const std::string& dir) {
  TG_ASSIGN_OR_RETURN(json tok, ReadJsonFile(dir + "/tokenizer.json", /*required=*/true));
  TG_ASSIGN_OR_RETURN(json config,
                      ReadJsonFile(dir + "/tokenizer_config.json", /*required=*/false));
  TG_ASSIGN_OR_RETURN(json special_map,
                      ReadJsonFile(dir + "/special_tokens_map.json", /*required=*/false));
  absl::StatusOr<VocabData> v;
  try {
    v = ParseHfTokenizer(tok, config, special_map);
  } catch (const json::exception& e) {
    // .at()/.get<>() throw on missing keys or wrong types; report instead of propagating.
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", dir, "/tokenizer.json: ", e.what()));
  }
  if (!v.ok()) return v.status();
  TG_RETURN_IF_ERROR(ValidateVocab(*v));
  return v;
}

}  // namespace textgen
