// Shared by the decoding unit tests that need text but no model: a tiny SentencePiece-style
// vocabulary with letters, a two-letter token, the two UTF-8 bytes of "é" and a control token;
// and an output constraint that allows one token.
#ifndef TEXTGEN_TESTS_ENGINE_DECODING_TOY_VOCAB_TEST_UTIL_H_
#define TEXTGEN_TESTS_ENGINE_DECODING_TOY_VOCAB_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "engine/decoding/token_constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace textgen::toy_vocab {

constexpr int32_t kUnk = 0;
constexpr int32_t kBos = 1;
constexpr int32_t kEos = 2;
constexpr int32_t kA = 3;       // "a"
constexpr int32_t kB = 4;       // "b"
constexpr int32_t kC = 5;       // "c"
constexpr int32_t kD = 6;       // "d"
constexpr int32_t kE1 = 7;      // byte 0xC3: the first byte of "é"
constexpr int32_t kE2 = 8;      // byte 0xA9: its second byte
constexpr int32_t kCall = 9;    // "<|call|>", a control token (no text unless shown)
constexpr int32_t kBC = 10;     // "bc"
constexpr int32_t kSpace = 11;  // " "
constexpr int kVocab = 12;

// Built once per process (Tokenizer is immutable).
inline const Tokenizer& ToyTokenizer() {
  static const Tokenizer* tok = [] {
    VocabData v;
    v.model = VocabModel::kLlama;
    v.tokens = {"<unk>", "<s>",    "</s>",   "a",        "b",  "c",
                "d",     "<0xC3>", "<0xA9>", "<|call|>", "bc", "\xE2\x96\x81"};
    v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal,
               TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,  TokenType::kByte,
               TokenType::kByte,    TokenType::kControl, TokenType::kNormal,  TokenType::kNormal};
    v.unk_id = kUnk;
    v.bos_id = kBos;
    v.eos_id = kEos;
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(v);
    if (!t.ok()) FAIL(t.status().ToString());
    return t->release();
  }();
  return *tok;
}

// Allows only `id` (nothing at all when it is negative) until it is accepted, then is complete.
class OnlyToken : public TokenConstraint {
 public:
  explicit OnlyToken(int32_t id) : id_(id) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<OnlyToken>(*this);
  }
  bool Mask(absl::Span<float> logits) const override {
    if (id_ < 0) return false;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (static_cast<int32_t>(i) != id_) logits[i] = -std::numeric_limits<float>::infinity();
    }
    return true;
  }
  bool Accept(int32_t token) override {
    done_ = token == id_;
    return done_;
  }
  bool Complete() const override { return done_; }

 private:
  int32_t id_;
  bool done_ = false;
};

}  // namespace textgen::toy_vocab

#endif  // TEXTGEN_TESTS_ENGINE_DECODING_TOY_VOCAB_TEST_UTIL_H_
