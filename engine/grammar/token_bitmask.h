// One bit per token id: the tokens a grammar allows next.
#ifndef TEXTGEN_ENGINE_GRAMMAR_TOKEN_BITMASK_H_
#define TEXTGEN_ENGINE_GRAMMAR_TOKEN_BITMASK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace textgen {

class TokenBitmask {
 public:
  explicit TokenBitmask(int32_t size = 0) { Resize(size); }

  void Resize(int32_t size) {
    size_ = size;
    words_.assign((static_cast<size_t>(size) + 63) / 64, 0);
  }
  int32_t size() const { return size_; }
  void Clear() { std::fill(words_.begin(), words_.end(), 0); }
  // Every id in [0, size()).
  void SetAll() {
    std::fill(words_.begin(), words_.end(), ~uint64_t{0});
    if (size_ % 64 != 0) words_.back() = (uint64_t{1} << (size_ % 64)) - 1;
  }
  void Set(int32_t id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  void Reset(int32_t id) { words_[id >> 6] &= ~(uint64_t{1} << (id & 63)); }
  // False for ids outside [0, size()).
  bool Test(int32_t id) const {
    return id >= 0 && id < size_ && ((words_[id >> 6] >> (id & 63)) & 1);
  }
  int32_t Count() const {
    int32_t n = 0;
    for (uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
  }
  bool operator==(const TokenBitmask& o) const { return size_ == o.size_ && words_ == o.words_; }
  // [ceil(size / 64)] words; bit (id % 64) of word id / 64.
  absl::Span<uint64_t> words() { return absl::MakeSpan(words_); }
  absl::Span<const uint64_t> words() const { return words_; }

 private:
  int32_t size_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_TOKEN_BITMASK_H_
