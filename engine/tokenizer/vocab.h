// The data a tokenizer is built from, and loaders from GGUF metadata and Hugging Face files.
#ifndef TEXTGEN_ENGINE_TOKENIZER_VOCAB_H_
#define TEXTGEN_ENGINE_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/format/gguf_file.h"

namespace textgen {

// Tokenization algorithm, named as in GGUF `tokenizer.ggml.model`.
enum class VocabModel {
  kLlama,  // "llama": SentencePiece-style; merges by token score, `<0xXX>` byte fallback
  kGpt2,   // "gpt2": byte-level BPE with ranked merges after a regex pre-tokenizer
};

// Token types, numbered as in GGUF `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct VocabData {
  VocabModel model = VocabModel::kLlama;
  // kGpt2: pre-tokenizer name (`tokenizer.ggml.pre`, see pretokenizer.h); empty means
  // llama.cpp's "default". Ignored when pre_regexes is set.
  std::string pre;
  // kGpt2: explicit split regexes (from a tokenizer.json), applied in order.
  std::vector<std::string> pre_regexes;
  bool ignore_merges = false;       // kGpt2: a word that is a token is emitted whole
  std::vector<std::string> tokens;  // token id -> raw vocab string
  std::vector<float> scores;        // per token (kLlama merge priority); empty means all 0
  std::vector<TokenType> types;     // per token; empty means all kNormal
  std::vector<std::string> merges;  // kGpt2: "left right", best (rank 0) first
  int32_t bos_id = -1;              // -1 when the vocab has none
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  // End-of-turn / end-of-message / fill-in-the-middle ids from GGUF keys; -1 when absent (then
  // Tokenizer::Create finds them by token text, as llama.cpp does).
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t fim_pad_id = -1;
  int32_t fim_rep_id = -1;
  int32_t fim_sep_id = -1;
  // Per token (empty means none): whitespace before (lstrip) / after (rstrip) a matched
  // special token is dropped (HF AddedToken attributes, llama.cpp LLAMA_TOKEN_ATTR_*STRIP).
  std::vector<bool> lstrip;
  std::vector<bool> rstrip;
  // llama.cpp sets rstrip on every special token of models named "phi-3"/"phi3" (general.name)
  // except <unk>, <s> and <|endoftext|>; Tokenizer::Create applies it.
  bool phi3_rstrip = false;
  // tokenizer.json's normalizer is NFC. Not applied: llama.cpp does not normalize either, and
  // the ids agree for NFC input (decomposed text can differ from Hugging Face).
  bool hf_nfc = false;
  bool add_bos = false;           // whether callers should prepend BOS by default
  bool add_space_prefix = false;  // kLlama: prepend a space (SentencePiece dummy prefix)
};

// Checks sizes agree and special ids are -1 or in range.
absl::Status ValidateVocab(const VocabData& vocab);

// Reads the `tokenizer.ggml.*` keys. Defaults follow llama.cpp when a key is absent or a special
// id is out of range ("llama": bos 1, eos 2, unk 0, add_bos and add_space_prefix true; "gpt2":
// no specials, no BOS unless the pre-tokenizer implies it (llama-bpe), no prefix).
// Unimplemented naming the model or pre-tokenizer for ones outside pretokenizer.cc's table;
// InvalidArgument naming the key for a value of the wrong type.
absl::StatusOr<VocabData> VocabFromGguf(const GgufFile& gguf);

// Reads a Hugging Face tokenizer folder: tokenizer.json (BPE model) plus tokenizer_config.json
// or special_tokens_map.json for bos/eos/pad and add_bos_token. A SentencePiece-style BPE
// (Metaspace / Prepend "▁" normalizer) maps to kLlama exactly as llama.cpp's converter does:
// same token order, every score -1000, special tokens kControl, `<0xXX>` kByte; so it
// tokenizes like the GGUF converted from it. A ByteLevel BPE maps to kGpt2 with its merges and
// the split regexes its pre_tokenizer spells (Sequence of Split / ByteLevel / Digits). Any
// normalizer or pre-tokenizer outside what is understood is Unimplemented naming it; a value
// of the wrong type or range is InvalidArgument naming the file, key and value.
absl::StatusOr<VocabData> VocabFromHfTokenizerJson(const std::string& dir);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_VOCAB_H_
