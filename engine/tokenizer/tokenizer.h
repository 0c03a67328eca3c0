// Text <-> token ids for Llama (SentencePiece-style) and GPT-2 (byte-level BPE) vocabularies,
// reproducing llama.cpp's tokenizer ids and its streamed detokenization.
#ifndef TEXTGEN_ENGINE_TOKENIZER_TOKENIZER_H_
#define TEXTGEN_ENGINE_TOKENIZER_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/format/gguf_file.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace textgen {

// Immutable after Create; all methods are const and safe to call concurrently.
// Every input is accepted: ill-formed UTF-8 never fails or crashes Encode (kLlama sends such
// bytes through byte fallback, kGpt2 first replaces them with U+FFFD as llama.cpp does).
class Tokenizer {
 public:
  // InvalidArgument if the vocab is inconsistent (see ValidateVocab); Unimplemented for a
  // kGpt2 pre-tokenizer name outside pretokenizer.cc's table. Applies llama.cpp's rules that
  // go by token text: end-of-generation and fill-in-the-middle texts (<|eot_id|>, <|im_end|>,
  // <end_of_turn>, </s>, <|fim_pad|>, ...) become control tokens, and the EOG set is derived.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(VocabData vocab);
  // VocabFromGguf + Create.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);

  // Token ids of `text`, optionally preceded by BOS (nothing is added when the vocab has no
  // BOS). With `parse_special`, text spelling a control token (e.g. "<|im_start|>") becomes
  // that token (chat templates turn it on); otherwise only user-defined tokens (Qwen3's
  // <think>) are matched as units, as llama.cpp's tokenizer_st_partition does; a matched
  // token's lstrip / rstrip drops the ASCII whitespace before / after it, and pieces of text never
  // merge into control, byte or unused tokens (llama.cpp can assemble e.g. "<0x41>" into a byte
  // token). For kLlama a space is prefixed (add_space_prefix) to the text and after each special
  // token, as llama.cpp does. Characters a kLlama vocab can neither merge nor byte-encode become
  // one unk token each (dropped if the vocab has no unk).
  std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                              bool parse_special = false) const;

  // Raw vocab string, e.g. "▁the", "<0x0A>", "Ġthe"; empty for out-of-range ids.
  std::string_view TokenText(int32_t id) const;
  // Bytes the token contributes to decoded text (llama.cpp token_to_piece, special=false):
  // "▁" -> " " (kLlama); "<0xXX>" byte tokens -> that byte; GPT-2 byte-level characters mapped
  // back to bytes; user-defined tokens verbatim; control, unknown and unused tokens -> empty.
  // Empty for out-of-range ids. May be a partial UTF-8 sequence.
  std::string_view TokenBytes(int32_t id) const;
  // Concatenated TokenBytes (out-of-range ids contribute nothing). This is how llama.cpp's
  // server renders a continuation: pieces are joined as-is, so a leading "▁" stays a leading
  // space (unlike llama_detokenize, which strips one). The result can be ill-formed UTF-8 if
  // the ids split a character; use IncrementalDetokenizer or SanitizeUtf8 for display.
  std::string Decode(absl::Span<const int32_t> ids) const;

  // -1 if `text` is not a token.
  int32_t TokenToId(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  int32_t unk_id() const { return vocab_.unk_id; }
  int32_t pad_id() const { return vocab_.pad_id; }
  bool add_bos() const { return vocab_.add_bos; }
  VocabModel model() const { return vocab_.model; }
  // kUndefined for out-of-range ids.
  TokenType token_type(int32_t id) const;
  bool IsControl(int32_t id) const { return token_type(id) == TokenType::kControl; }
  // End of generation: EOS, EOT, EOM, FIM pad/repo/separator and the control tokens llama.cpp
  // recognises by text (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...).
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }  // ascending
  const VocabData& vocab() const { return vocab_; }

 private:
  struct Fragment {
    int32_t token;          // >= 0: a special token matched in the text
    std::string_view text;  // otherwise: raw text to tokenize
  };
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  explicit Tokenizer(VocabData vocab) : vocab_(std::move(vocab)) {}
  void ApplyTextRules();
  void BuildTables();
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;
  bool IsTextToken(int32_t id) const;
  float Score(int32_t id) const;
  void EncodeSpm(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpe(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const;

  VocabData vocab_;
  absl::flat_hash_map<std::string, int32_t> text_to_id_;
  std::vector<std::string> pieces_;  // TokenBytes per id
  // kLlama: byte-fallback token per byte; kGpt2: token of each byte's byte-level character.
  std::array<int32_t, 256> byte_tokens_{};
  absl::flat_hash_map<uint64_t, Merge> merges_;  // kGpt2: (left id << 32 | right id)
  std::vector<int32_t> specials_;                // matched as units, longest text first
  std::unique_ptr<PreTokenizer> pre_;            // kGpt2
  std::vector<int32_t> eog_ids_;
  std::vector<std::string> byte_level_;  // kGpt2: byte -> its byte-level character (UTF-8)
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_TOKENIZER_H_
