#include "engine/tokenizer/vocab.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr char kKeyPrefix[] = "tokenizer.ggml.";

std::string Key(const char* name) { return absl::StrCat(kKeyPrefix, name); }

// Reads an optional integer special-token id; keeps `*id` (the default) when the key is absent
// or the value is not a valid id, as llama.cpp does (e.g. stories260K stores pad = 2^32-1).
absl::Status ReadSpecialId(const GgufFile& gguf, const char* name, size_t n_tokens, int32_t* id) {
  absl::StatusOr<int64_t> v = gguf.GetInt(Key(name));
  if (absl::IsNotFound(v.status())) return absl::OkStatus();
  if (!v.ok()) return v.status();  // names the file, the key and the type found
  if (*v >= 0 && static_cast<uint64_t>(*v) < n_tokens) *id = static_cast<int32_t>(*v);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& gguf, const char* name, bool* value) {
  absl::StatusOr<bool> v = gguf.GetBool(Key(name));
  if (absl::IsNotFound(v.status())) return absl::OkStatus();
  if (!v.ok()) return v.status();  // names the file, the key and the type found
  *value = *v;
  return absl::OkStatus();
}

TokenType TokenTypeFromInt(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(TokenType::kByte)) return TokenType::kUndefined;
  return static_cast<TokenType>(v);
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

}  // namespace textgen
