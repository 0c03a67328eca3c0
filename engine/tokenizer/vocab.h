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
  kGpt2,   // "gpt2": byte-level BPE with ranked merges and the GPT-2 pre-tokenizer
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
  std::string pre;                  // pre-tokenizer name (`tokenizer.ggml.pre`), may be empty
  std::vector<std::string> tokens;  // token id -> raw vocab string
  std::vector<float> scores;        // per token (kLlama merge priority); empty means all 0
  std::vector<TokenType> types;     // per token; empty means all kNormal
  std::vector<std::string> merges;  // kGpt2: "left right", best (rank 0) first
  int32_t bos_id = -1;              // -1 when the vocab has none
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;           // whether callers should prepend BOS by default
  bool add_space_prefix = false;  // kLlama: prepend a space (SentencePiece dummy prefix)
};

// Checks sizes agree and special ids are -1 or in range.
absl::Status ValidateVocab(const VocabData& vocab);

// Reads the `tokenizer.ggml.*` keys. Defaults follow llama.cpp when a key is absent or a special
// id is out of range ("llama": bos 1, eos 2, unk 0, add_bos and add_space_prefix true; "gpt2":
// no specials, no BOS, no prefix). Unimplemented for other models or pre-tokenizers.
absl::StatusOr<VocabData> VocabFromGguf(const GgufFile& gguf);

// Reads a Hugging Face tokenizer folder: tokenizer.json (BPE model) plus tokenizer_config.json
// or special_tokens_map.json for bos/eos/pad and add_bos_token. A SentencePiece-style BPE
// (Metaspace / Prepend "▁" normalizer) maps to kLlama exactly as llama.cpp's converter does:
// same token order, every score -1000, special tokens kControl, `<0xXX>` kByte; so it
// tokenizes like the GGUF converted from it. A ByteLevel BPE maps to kGpt2 with its merges
// and always splits with the GPT-2 regex (a custom Split pre-tokenizer is not read).
absl::StatusOr<VocabData> VocabFromHfTokenizerJson(const std::string& dir);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_VOCAB_H_
