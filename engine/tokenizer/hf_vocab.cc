// VocabFromHfTokenizerJson: a Hugging Face tokenizer folder (tokenizer.json plus
// tokenizer_config.json / special_tokens_map.json) read into VocabData. Every value is
// type- and range-checked; nothing here throws (nlohmann is used with non-throwing accessors).
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/vocab.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

using nlohmann::json;

constexpr char kSpm[] = "\xE2\x96\x81";  // U+2581 '▁'
// Hugging Face's ByteLevel pre-tokenizer regex (use_regex: true).
constexpr char kByteLevelRegex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A value named by its file and key path, for error messages.
struct Where {
  const std::string* file;
  std::string path;
  Where At(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  Where At(size_t i) const { return {file, absl::StrCat(path, "[", i, "]")}; }
};

std::string Shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

absl::Status Bad(const Where& w, const json& v, const char* expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(*w.file, ": ", w.path, " = ", Shown(v), ": expected ", expected));
}

absl::Status Unsupported(const Where& w, const json& v, const char* what) {
  return absl::UnimplementedError(
      absl::StrCat(*w.file, ": ", w.path, " = ", Shown(v), ": ", what, " is not supported"));
}

// Member `key` of object `obj`, or nullptr when absent (a null value counts as absent).
const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A copy of member `key` (null when absent), for error messages.
json Get(const json& obj, const char* key) {
  const json* v = Member(obj, key);
  return v == nullptr ? json() : *v;
}

absl::Status OptString(const json& obj, const char* key, const Where& w, std::string* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) return Bad(w.At(key), *v, "a string");
  *out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status OptBool(const json& obj, const char* key, const Where& w, bool* out) {
  const json* v = Member(obj, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean()) return Bad(w.At(key), *v, "true or false");
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::StatusOr<int32_t> TokenId(const json& v, const Where& w) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t{1} << 24)) {
    return Bad(w, v, "a token id in [0, 2^24)");
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading ", path));
  return ss.str();
}

// Parses a JSON file that must hold an object; a missing optional file gives null.
absl::StatusOr<json> ReadJsonObject(const std::string& path, bool required) {
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) {
    if (!required && absl::IsNotFound(text.status())) return json();
    return text.status();
  }
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not an object"));
  return j;
}

bool IsByteTokenText(const std::string& s) {
  const auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  return s.size() == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && hex(s[3]) && hex(s[4]) &&
         s[5] == '>';
}

// llama.cpp's converter (TextModel.does_token_look_special) makes these added tokens control
// even when tokenizer.json does not mark them special.
bool LooksSpecial(const std::string& t) {
  const auto wraps = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wraps("<|", "|>") ||
         wraps("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wraps("<unused", ">");
}

// HF writes a special token as a string or as an AddedToken object {"content": ...}; "" when
// absent or null.
absl::StatusOr<std::string> SpecialTokenText(const json& config, const char* name, const Where& w) {
  const json* v = Member(config, name);
  if (v == nullptr) return std::string();
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) {
    const json* c = Member(*v, "content");
    if (c != nullptr && c->is_string()) return c->get<std::string>();
  }
  return Bad(w.At(name), *v, "a string or an object with a string \"content\"");
}

// What the normalizer and pre-tokenizer say, gathered while checking them.
struct Pipeline {
  bool metaspace = false;   // spaces become U+2581 (SentencePiece style)
  bool prefix = false;      // a U+2581 is prepended
  bool byte_level = false;  // bytes map to GPT-2's byte-level characters
  bool replace_space = false;
  bool nfc = false;
  std::vector<std::string> regexes;  // byte-level split regexes, in order
};

absl::Status ReadNormalizer(const json& n, const Where& w, Pipeline* p) {
  if (!n.is_object()) return Bad(w, n, "an object");
  std::string type;
  TG_RETURN_IF_ERROR(OptString(n, "type", w, &type));
  if (type == "Sequence") {
    const json* list = Member(n, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return Bad(w.At("normalizers"), list ? *list : json(), "an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TG_RETURN_IF_ERROR(ReadNormalizer((*list)[i], w.At("normalizers").At(i), p));
    }
    return absl::OkStatus();
  }
  if (type == "NFC") {
    p->nfc = true;
    return absl::OkStatus();
  }
  if (type == "Prepend") {
    std::string prepend;
    TG_RETURN_IF_ERROR(OptString(n, "prepend", w, &prepend));
    if (prepend != kSpm)
      return Unsupported(w.At("prepend"), Get(n, "prepend"), "Prepend other than U+2581");
    p->metaspace = p->prefix = true;
    return absl::OkStatus();
  }
  if (type == "Replace") {
    const json* pattern = Member(n, "pattern");
    std::string content;
    TG_RETURN_IF_ERROR(OptString(n, "content", w, &content));
    if (pattern == nullptr || !pattern->is_object() || Member(*pattern, "String") == nullptr ||
        !(*pattern)["String"].is_string() || (*pattern)["String"].get<std::string>() != " " ||
        content != kSpm) {
      return Unsupported(w, n, "a Replace normalizer other than \" \" -> U+2581");
    }
    p->metaspace = p->replace_space = true;
    return absl::OkStatus();
  }
  return Unsupported(w.At("type"), Get(n, "type"), "normalizer type");
}

absl::Status ReadPreTokenizer(const json& t, const Where& w, Pipeline* p) {
  if (!t.is_object()) return Bad(w, t, "an object");
  std::string type;
  TG_RETURN_IF_ERROR(OptString(t, "type", w, &type));
  if (type == "Sequence") {
    const json* list = Member(t, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return Bad(w.At("pretokenizers"), list ? *list : json(), "an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TG_RETURN_IF_ERROR(ReadPreTokenizer((*list)[i], w.At("pretokenizers").At(i), p));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    bool add_prefix_space = false, use_regex = true;
    TG_RETURN_IF_ERROR(OptBool(t, "add_prefix_space", w, &add_prefix_space));
    TG_RETURN_IF_ERROR(OptBool(t, "use_regex", w, &use_regex));
    if (add_prefix_space) {
      return Unsupported(w.At("add_prefix_space"), Get(t, "add_prefix_space"),
                         "ByteLevel add_prefix_space");
    }
    p->byte_level = true;
    if (use_regex) p->regexes.push_back(kByteLevelRegex);
    return absl::OkStatus();
  }
  if (type == "Digits") {
    bool individual = false;
    TG_RETURN_IF_ERROR(OptBool(t, "individual_digits", w, &individual));
    p->regexes.push_back(individual ? R"(\p{N})" : R"(\p{N}+)");
    return absl::OkStatus();
  }
  if (type == "Split") {
    std::string behavior;
    bool invert = false;
    TG_RETURN_IF_ERROR(OptString(t, "behavior", w, &behavior));
    TG_RETURN_IF_ERROR(OptBool(t, "invert", w, &invert));
    const json* pattern = Member(t, "pattern");
    if (pattern == nullptr || !pattern->is_object()) {
      return Bad(w.At("pattern"), pattern ? *pattern : json(),
                 "{\"Regex\": ...} or {\"String\": ...}");
    }
    const json* regex = Member(*pattern, "Regex");
    const json* str = Member(*pattern, "String");
    if ((regex != nullptr) == (str != nullptr) || !(regex ? regex : str)->is_string()) {
      return Bad(w.At("pattern"), *pattern, "{\"Regex\": string} or {\"String\": string}");
    }
    // Gemma 3 splits on " " after its normalizer replaced every space: nothing left to split.
    if (str != nullptr && str->get<std::string>() == " " && p->replace_space) {
      return absl::OkStatus();
    }
    if (behavior != "Isolated" || invert) {
      return Unsupported(w, t, "a Split other than behavior Isolated without invert");
    }
    p->regexes.push_back(regex ? regex->get<std::string>()
                               : absl::StrCat("\\Q", str->get<std::string>(), "\\E"));
    return absl::OkStatus();
  }
  if (type == "Metaspace") {
    std::string replacement = kSpm, scheme;
    bool add_prefix_space = false;
    TG_RETURN_IF_ERROR(OptString(t, "replacement", w, &replacement));
    TG_RETURN_IF_ERROR(OptString(t, "prepend_scheme", w, &scheme));
    TG_RETURN_IF_ERROR(OptBool(t, "add_prefix_space", w, &add_prefix_space));
    if (replacement != kSpm) {
      return Unsupported(w.At("replacement"), Get(t, "replacement"), "Metaspace replacement");
    }
    if (!scheme.empty() && scheme != "always" && scheme != "first" && scheme != "never") {
      return Bad(w.At("prepend_scheme"), Get(t, "prepend_scheme"), "always, first or never");
    }
    p->metaspace = true;
    // Older files say add_prefix_space, newer ones prepend_scheme.
    if (add_prefix_space || scheme == "always" || scheme == "first") p->prefix = true;
    return absl::OkStatus();
  }
  return Unsupported(w.At("type"), Get(t, "type"), "pre_tokenizer type");
}

// Whether the post-processor's single-sequence template starts with `bos_text` (how byte-level
// tokenizers such as Llama 3's say they add BOS).
bool TemplateAddsBos(const json& post, const std::string& bos_text) {
  if (!post.is_object() || bos_text.empty()) return false;
  const json* type = Member(post, "type");
  if (type == nullptr || !type->is_string()) return false;
  if (*type == "Sequence") {
    const json* list = Member(post, "processors");
    if (list == nullptr || !list->is_array()) return false;
    for (const json& p : *list) {
      if (TemplateAddsBos(p, bos_text)) return true;
    }
    return false;
  }
  if (*type != "TemplateProcessing") return false;
  const json* single = Member(post, "single");
  if (single == nullptr || !single->is_array() || single->empty()) return false;
  const json* special = Member((*single)[0], "SpecialToken");
  if (special == nullptr) return false;
  const json* id = Member(*special, "id");
  return id != nullptr && id->is_string() && id->get<std::string>() == bos_text;
}

absl::StatusOr<VocabData> ParseHfTokenizer(const std::string& dir, const json& tok,
                                           const json& config, const json& special_map) {
  const std::string tok_file = dir + "/tokenizer.json";
  const std::string config_file = dir + "/tokenizer_config.json";
  const std::string map_file = dir + "/special_tokens_map.json";
  const Where tw{&tok_file, ""}, cw{&config_file, ""}, mw{&map_file, ""};

  const json* model = Member(tok, "model");
  if (model == nullptr || !model->is_object()) {
    return Bad(tw.At("model"), model ? *model : json(), "an object");
  }
  const Where w_model = tw.At("model");
  std::string model_type = "BPE";
  TG_RETURN_IF_ERROR(OptString(*model, "type", w_model, &model_type));
  if (model_type != "BPE")
    return Unsupported(w_model.At("type"), Get(*model, "type"), "model type");

  Pipeline pipe;
  if (const json* n = Member(tok, "normalizer")) {
    TG_RETURN_IF_ERROR(ReadNormalizer(*n, tw.At("normalizer"), &pipe));
  }
  if (const json* t = Member(tok, "pre_tokenizer")) {
    TG_RETURN_IF_ERROR(ReadPreTokenizer(*t, tw.At("pre_tokenizer"), &pipe));
  }
  if (pipe.metaspace == pipe.byte_level) {
    return absl::UnimplementedError(absl::StrCat(
        tok_file, ": neither a SentencePiece-style (U+2581) nor a ByteLevel BPE tokenizer"));
  }
  if (pipe.metaspace && !pipe.regexes.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(tok_file, ": split regexes on a SentencePiece-style tokenizer"));
  }

  VocabData v;
  v.model = pipe.metaspace ? VocabModel::kLlama : VocabModel::kGpt2;
  v.add_space_prefix = pipe.metaspace && pipe.prefix;
  v.add_bos = pipe.metaspace;  // llama.cpp's default per family; the config may override
  v.hf_nfc = pipe.nfc;
  TG_RETURN_IF_ERROR(OptBool(*model, "ignore_merges", w_model, &v.ignore_merges));

  // Token table: model.vocab plus added_tokens (which may extend or override it).
  const json* vocab = Member(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return Bad(w_model.At("vocab"), vocab ? *vocab : json(), "an object of token -> id");
  }
  std::vector<std::pair<int32_t, std::string>> entries;
  entries.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    TG_ASSIGN_OR_RETURN(int32_t id, TokenId(it.value(), w_model.At("vocab").At(it.key())));
    entries.emplace_back(id, it.key());
  }
  struct Added {
    int32_t id;
    bool special, lstrip, rstrip;
  };
  std::vector<Added> added;
  if (const json* list = Member(tok, "added_tokens")) {
    if (!list->is_array()) return Bad(tw.At("added_tokens"), *list, "an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const json& a = (*list)[i];
      const Where wa = tw.At("added_tokens").At(i);
      if (!a.is_object()) return Bad(wa, a, "an object");
      const json* id = Member(a, "id");
      if (id == nullptr) return Bad(wa.At("id"), json(), "a token id");
      TG_ASSIGN_OR_RETURN(int32_t tid, TokenId(*id, wa.At("id")));
      std::string content;
      TG_RETURN_IF_ERROR(OptString(a, "content", wa, &content));
      if (content.empty()) return Bad(wa.At("content"), Get(a, "content"), "a non-empty string");
      Added ad{tid, false, false, false};
      TG_RETURN_IF_ERROR(OptBool(a, "special", wa, &ad.special));
      TG_RETURN_IF_ERROR(OptBool(a, "lstrip", wa, &ad.lstrip));
      TG_RETURN_IF_ERROR(OptBool(a, "rstrip", wa, &ad.rstrip));
      entries.emplace_back(tid, content);
      added.push_back(ad);
    }
  }
  if (entries.empty()) return Bad(w_model.At("vocab"), *vocab, "at least one token");
  int32_t n = 0;
  for (const auto& e : entries) n = std::max(n, e.first + 1);
  v.tokens.resize(n);
  v.types.assign(n, TokenType::kUnused);
  std::vector<bool> present(n, false);
  absl::flat_hash_map<std::string, int32_t> ids;
  for (const auto& [id, text] : entries) {
    v.tokens[id] = text;
    v.types[id] = IsByteTokenText(text) ? TokenType::kByte : TokenType::kNormal;
    present[id] = true;
    ids[text] = id;
  }
  for (int32_t i = 0; i < n; ++i) {
    // Gaps get placeholder names like llama.cpp's converter writes.
    if (!present[i]) v.tokens[i] = absl::StrCat("[PAD", i, "]");
  }
  for (const Added& a : added) {
    if (v.types[a.id] != TokenType::kByte) {
      v.types[a.id] =
          a.special || LooksSpecial(v.tokens[a.id]) ? TokenType::kControl : TokenType::kUserDefined;
    }
    if (v.types[a.id] == TokenType::kUserDefined && pipe.metaspace) {
      // The converter writes a SentencePiece vocab's user-defined tokens with real spaces
      // (they are matched in raw text, before spaces become U+2581).
      std::string& text = v.tokens[a.id];
      for (size_t pos; (pos = text.find(kSpm)) != std::string::npos;) text.replace(pos, 3, " ");
    }
    if (a.lstrip) v.lstrip.resize(n, false), v.lstrip[a.id] = true;
    if (a.rstrip) v.rstrip.resize(n, false), v.rstrip[a.id] = true;
  }

  const auto lookup = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  };
  std::string bos_text;
  const auto special = [&](const char* name, int32_t* id) -> absl::Status {
    TG_ASSIGN_OR_RETURN(std::string text, SpecialTokenText(config, name, cw));
    if (text.empty()) {
      TG_ASSIGN_OR_RETURN(text, SpecialTokenText(special_map, name, mw));
    }
    if (std::string(name) == "bos_token") bos_text = text;
    *id = lookup(text);
    return absl::OkStatus();
  };
  TG_RETURN_IF_ERROR(special("bos_token", &v.bos_id));
  TG_RETURN_IF_ERROR(special("eos_token", &v.eos_id));
  TG_RETURN_IF_ERROR(special("pad_token", &v.pad_id));
  TG_RETURN_IF_ERROR(special("unk_token", &v.unk_id));
  if (v.unk_id < 0) {
    std::string unk;
    TG_RETURN_IF_ERROR(OptString(*model, "unk_token", w_model, &unk));
    v.unk_id = lookup(unk);
  }
  // The converter marks all of HF's special ids as control tokens.
  for (int32_t id : {v.bos_id, v.eos_id, v.pad_id, v.unk_id}) {
    if (id >= 0) v.types[id] = TokenType::kControl;
  }
  // BOS: tokenizer_config's add_bos_token when given, else the post-processor's template.
  if (Member(config, "add_bos_token") != nullptr) {
    TG_RETURN_IF_ERROR(OptBool(config, "add_bos_token", cw, &v.add_bos));
  } else if (const json* post = Member(tok, "post_processor")) {
    v.add_bos = TemplateAddsBos(*post, bos_text);
  }
  if (v.add_bos && v.bos_id < 0) v.add_bos = false;  // nothing to add

  const json* merges = Member(*model, "merges");
  if (merges != nullptr && !merges->is_array()) {
    return Bad(w_model.At("merges"), *merges, "an array");
  }
  if (merges != nullptr) {
    v.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        v.merges.push_back(absl::StrCat(m[0].get<std::string>(), " ", m[1].get<std::string>()));
      } else {
        return Bad(w_model.At("merges").At(i), m, "\"left right\" or [left, right]");
      }
    }
  }
  if (v.model == VocabModel::kLlama) {
    // Scores as llama.cpp's converter would have them. A legacy Llama tokenizer.json (Prepend
    // normalizer, no tokenizer.model beside it) goes through its LlamaHfVocab: every score
    // -1000, so merging pairs leftmost first; matching that keeps ids equal to the GGUF
    // converted from it (TinyStories). Newer SentencePiece exports (Gemma: Replace only) are
    // converted from tokenizer.model's scores, from which Hugging Face generated the merges
    // (sorted by the merged piece's score), so -(rank of the first merge producing a piece)
    // restores their order. Which one a folder gets is decided by the normalizer, a heuristic.
    v.scores.assign(n, -1000.0f);
    if (!pipe.prefix) {
      for (size_t rank = v.merges.size(); rank-- > 0;) {
        const std::string& m = v.merges[rank];
        const size_t sep = m.find(' ', 1);
        if (sep == std::string::npos) continue;
        const int32_t id = lookup(m.substr(0, sep) + m.substr(sep + 1));
        if (id >= 0) v.scores[id] = -static_cast<float>(rank);
      }
    }
    v.merges.clear();  // kLlama merges by score
  } else {
    v.pre = "tokenizer.json";
    v.pre_regexes = pipe.regexes;
    if (v.pre_regexes.empty()) v.pre_regexes.push_back("(?s).+");  // no split: one word
  }
  return v;
}

}  // namespace

absl::StatusOr<VocabData> VocabFromHfTokenizerJson(const std::string& dir) {
  TG_ASSIGN_OR_RETURN(json tok, ReadJsonObject(dir + "/tokenizer.json", /*required=*/true));
  TG_ASSIGN_OR_RETURN(json config,
                      ReadJsonObject(dir + "/tokenizer_config.json", /*required=*/false));
  TG_ASSIGN_OR_RETURN(json special_map,
                      ReadJsonObject(dir + "/special_tokens_map.json", /*required=*/false));
  absl::StatusOr<VocabData> v;
  try {
    v = ParseHfTokenizer(dir, tok, config, special_map);
  } catch (const json::exception& e) {
    // Every access above is checked first; this is a last line of defence, not a path.
    return absl::InternalError(absl::StrCat("reading ", dir, "/tokenizer.json: ", e.what()));
  }
  if (!v.ok()) return v.status();
  TG_RETURN_IF_ERROR(ValidateVocab(*v));
  return v;
}

}  // namespace textgen
