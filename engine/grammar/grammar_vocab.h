// The vocabulary as grammars see it: each token's bytes, which tokens end generation, and the
// byte-matchable tokens sorted by their bytes (the token trie, walked once per grammar state).
#ifndef TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_VOCAB_H_
#define TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_VOCAB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

// Immutable; safe to share across threads.
class GrammarVocab {
 public:
  // Built once per tokenizer (0.1-0.3 s for 128k-262k tokens: keep it with the model). Control,
  // unknown and unused tokens have no bytes (only a token element such as <[id]> or <|im_end|>
  // matches them); EOG tokens are never matched by bytes: they are allowed exactly where the
  // grammar can end.
  static std::shared_ptr<const GrammarVocab> Create(const Tokenizer& tokenizer);
  // For tests and other token sources: token id -> bytes ("" = matched by token elements only),
  // the EOG ids, and the texts token elements may name (<|im_end|> -> id).
  static std::shared_ptr<const GrammarVocab> FromTokens(
      std::vector<std::string> bytes, const std::vector<int32_t>& eog_ids,
      absl::flat_hash_map<std::string, int32_t> special_texts = {});

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  // The bytes a token contributes to the text ("" for the ones above); "" for bad ids.
  std::string_view bytes(int32_t id) const;
  bool is_eog(int32_t id) const { return id >= 0 && id < size() && eog_[id]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // The token whose vocabulary text is exactly `text` (for <|...|> elements); -1 if none.
  int32_t FindText(std::string_view text) const;

  // Byte-matchable tokens (bytes non-empty, not EOG), sorted by bytes: sorted_ids()[i], its
  // bytes sorted_bytes(i), and lcp(i) = bytes shared with the previous one (0 for i = 0).
  int32_t num_sorted() const { return static_cast<int32_t>(sorted_ids_.size()); }
  const std::vector<int32_t>& sorted_ids() const { return sorted_ids_; }
  std::string_view sorted_bytes(int32_t i) const {
    return std::string_view(sorted_data_)
        .substr(sorted_offsets_[i], sorted_offsets_[i + 1] - sorted_offsets_[i]);
  }
  const char* sorted_data() const { return sorted_data_.data(); }
  const uint32_t* sorted_offsets() const { return sorted_offsets_.data(); }  // [num_sorted + 1]
  int32_t lcp(int32_t i) const { return lcp_[i]; }
  // The first j > i with lcp(j) < lcp(i) (num_sorted() if none): every token between shares
  // token i's first lcp(i) bytes, so a walk skips a dead subtree in a few jumps.
  int32_t next_smaller(int32_t i) const { return next_smaller_[i]; }
  int32_t max_token_bytes() const { return max_token_bytes_; }
  const std::vector<int32_t>& lcp_array() const { return lcp_; }
  const std::vector<int32_t>& next_smaller_array() const { return next_smaller_; }

  // Tokens longer than kLongTokenBytes (the mask cache classifies them apart, see
  // mask_cache.h): sorted-order indices ascending, with lcp and next_smaller among themselves.
  static constexpr int32_t kLongTokenBytes = 32;
  const std::vector<int32_t>& long_tokens() const { return long_tokens_; }
  const std::vector<int32_t>& long_lcp() const { return long_lcp_; }
  const std::vector<int32_t>& long_next_smaller() const { return long_next_smaller_; }
  // Bitset [ceil(size / 64)] of the byte-matchable tokens of 1..n bytes, n <= kLongTokenBytes.
  const std::vector<uint64_t>& tokens_up_to(int32_t n) const { return tokens_up_to_[n]; }
  int32_t token_length(int32_t id) const { return static_cast<int32_t>(bytes(id).size()); }

 private:
  GrammarVocab() = default;
  void Finish();

  std::string data_;               // every token's bytes, by id
  std::vector<uint32_t> offsets_;  // [size + 1]
  std::vector<bool> eog_;
  std::vector<int32_t> eog_ids_;
  absl::flat_hash_map<std::string, int32_t> texts_;
  std::vector<int32_t> sorted_ids_;
  std::string sorted_data_;
  std::vector<uint32_t> sorted_offsets_;  // [num_sorted + 1]
  std::vector<int32_t> lcp_;
  std::vector<int32_t> next_smaller_;
  std::vector<int32_t> long_tokens_, long_lcp_, long_next_smaller_;
  std::vector<std::vector<uint64_t>> tokens_up_to_;
  int32_t max_token_bytes_ = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_VOCAB_H_
