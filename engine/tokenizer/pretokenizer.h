// Regex pre-tokenizers for byte-level BPE vocabularies: the word splits llama.cpp's llama-vocab
// applies per `tokenizer.ggml.pre`, or the Split regexes a Hugging Face tokenizer.json lists,
// run by PCRE2 (UTF + Unicode properties) as written.
#ifndef TEXTGEN_ENGINE_TOKENIZER_PRETOKENIZER_H_
#define TEXTGEN_ENGINE_TOKENIZER_PRETOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace textgen {

// What a named pre-tokenizer implies besides its regexes (llama.cpp's per-name flags that
// change ids).
struct PreTokenizerTraits {
  // A word that is itself a vocab token is emitted whole, without merging (Llama 3).
  bool ignore_merges = false;
};

// Immutable after creation; Split is const and safe to call concurrently (match data is per
// call).
class PreTokenizer {
 public:
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The regex list llama.cpp uses for `name` (GGUF `tokenizer.ggml.pre`, e.g. "llama-bpe",
  // "qwen2"). Unimplemented naming `name` when it is not in the table.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> ForName(std::string_view name);
  // InvalidArgument naming the pattern if one does not compile.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromRegexes(
      std::vector<std::string> regexes);
  // Unimplemented for a name outside the table.
  static absl::StatusOr<PreTokenizerTraits> TraitsForName(std::string_view name);

  // Each regex in turn splits every piece into its matches and the text between them (both
  // kept, as llama.cpp's unicode_regex_split and HF's Split "Isolated" do); a regex only sees
  // one piece, so lookarounds and `$` stop at the piece's ends. `text` must be valid UTF-8.
  // The pieces are views into `text` and concatenate back to it.
  std::vector<std::string_view> Split(std::string_view text) const;

  const std::vector<std::string>& regexes() const { return regexes_; }

 private:
  struct Compiled;
  PreTokenizer() = default;
  std::vector<std::string> regexes_;
  std::vector<Compiled*> compiled_;  // owned; one per regex
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_PRETOKENIZER_H_
