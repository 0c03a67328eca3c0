#include "engine/grammar/grammar_vocab.h"

#include <algorithm>
#include <numeric>

namespace textgen {
namespace {

std::vector<int32_t> NextSmaller(const std::vector<int32_t>& lcp) {
  const int32_t n = static_cast<int32_t>(lcp.size());
  std::vector<int32_t> out(n, n);
  std::vector<int32_t> pending;  // indices whose next smaller is not known yet (lcp ascending)
  for (int32_t j = 0; j < n; ++j) {
    while (!pending.empty() && lcp[pending.back()] > lcp[j]) {
      out[pending.back()] = j;
      pending.pop_back();
    }
    pending.push_back(j);
  }
  return out;
}

}  // namespace

std::shared_ptr<const GrammarVocab> GrammarVocab::Create(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(n);
  absl::flat_hash_map<std::string, int32_t> texts;
  for (int32_t id = 0; id < n; ++id) {
    TokenType type = tokenizer.token_type(id);
    bool no_bytes =
        type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused;
    if (!no_bytes) bytes[id] = std::string(tokenizer.TokenBytes(id));
    // Token elements name special tokens by text (<|im_end|>, <think>); llama.cpp tokenizes the
    // element's text with special tokens parsed, which for these is exactly the token's text.
    std::string_view text = tokenizer.TokenText(id);
    if (type != TokenType::kNormal && type != TokenType::kByte && !text.empty()) {
      texts.try_emplace(std::string(text), id);
    }
  }
  return FromTokens(std::move(bytes), tokenizer.eog_ids(), std::move(texts));
}

std::shared_ptr<const GrammarVocab> GrammarVocab::FromTokens(
    std::vector<std::string> bytes, const std::vector<int32_t>& eog_ids,
    absl::flat_hash_map<std::string, int32_t> special_texts) {
  std::shared_ptr<GrammarVocab> v(new GrammarVocab());
  const int32_t n = static_cast<int32_t>(bytes.size());
  v->offsets_.reserve(n + 1);
  v->offsets_.push_back(0);
  for (const std::string& b : bytes) {
    v->data_ += b;
    v->offsets_.push_back(static_cast<uint32_t>(v->data_.size()));
  }
  v->eog_.assign(n, false);
  for (int32_t id : eog_ids) {
    if (id >= 0 && id < n && !v->eog_[id]) {
      v->eog_[id] = true;
      v->eog_ids_.push_back(id);
    }
  }
  std::sort(v->eog_ids_.begin(), v->eog_ids_.end());
  v->texts_ = std::move(special_texts);
  v->Finish();
  return v;
}

std::string_view GrammarVocab::bytes(int32_t id) const {
  if (id < 0 || id >= size()) return {};
  return std::string_view(data_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

int32_t GrammarVocab::FindText(std::string_view text) const {
  auto it = texts_.find(absl::string_view(text.data(), text.size()));
  return it == texts_.end() ? -1 : it->second;
}

void GrammarVocab::Finish() {
  for (int32_t id = 0; id < size(); ++id) {
    if (!bytes(id).empty() && !eog_[id]) sorted_ids_.push_back(id);
  }
  std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t a, int32_t b) {
    std::string_view x = bytes(a), y = bytes(b);
    return x != y ? x < y : a < b;
  });
  sorted_offsets_.push_back(0);
  lcp_.reserve(sorted_ids_.size());
  std::string_view prev;
  for (int32_t id : sorted_ids_) {
    std::string_view b = bytes(id);
    size_t l = 0;
    while (l < prev.size() && l < b.size() && prev[l] == b[l]) ++l;
    lcp_.push_back(static_cast<int32_t>(l));
    sorted_data_ += b;
    sorted_offsets_.push_back(static_cast<uint32_t>(sorted_data_.size()));
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(b.size()));
    prev = b;
  }
  next_smaller_ = NextSmaller(lcp_);
  std::string_view prev_long;
  for (int32_t i = 0; i < num_sorted(); ++i) {
    std::string_view b = sorted_bytes(i);
    if (static_cast<int32_t>(b.size()) <= kLongTokenBytes) continue;
    size_t l = 0;
    while (l < prev_long.size() && l < b.size() && prev_long[l] == b[l]) ++l;
    long_tokens_.push_back(i);
    long_lcp_.push_back(static_cast<int32_t>(l));
    prev_long = b;
  }
  long_next_smaller_ = NextSmaller(long_lcp_);
  const size_t words = (static_cast<size_t>(size()) + 63) / 64;
  tokens_up_to_.assign(kLongTokenBytes + 1, std::vector<uint64_t>(words, 0));
  for (int32_t id : sorted_ids_) {
    for (int32_t n = token_length(id); n <= kLongTokenBytes; ++n) {
      tokens_up_to_[n][id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
}

}  // namespace textgen
