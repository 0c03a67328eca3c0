// UTF-8 decoding/validation and the Unicode classes the tokenizers need (\p{L}, \p{N}, \s).
#ifndef TEXTGEN_ENGINE_TOKENIZER_UNICODE_H_
#define TEXTGEN_ENGINE_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace textgen {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

enum class Utf8Status {
  kOk,         // a well-formed sequence of `length` bytes
  kInvalid,    // ill-formed: `length` is the maximal subpart to replace with one U+FFFD
  kTruncated,  // a valid prefix of `length` bytes that the input ends inside
};

struct Utf8Char {
  Utf8Status status = Utf8Status::kOk;
  uint32_t codepoint = 0;  // U+FFFD unless status == kOk
  size_t length = 1;       // always >= 1 so callers always make progress
};

// Decodes the sequence starting at text[pos] (pos < text.size()). Strict: overlongs,
// surrogates and values above U+10FFFF are ill-formed (Unicode Table 3-7).
Utf8Char DecodeUtf8(std::string_view text, size_t pos);

void AppendUtf8(uint32_t codepoint, std::string* out);

bool IsValidUtf8(std::string_view text);

// Replaces each maximal ill-formed subpart (and a truncated tail) with U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// Length of the trailing bytes of `text` that form a valid but incomplete sequence (0..3):
// the bytes a streaming decoder must hold back until more arrive.
size_t IncompleteUtf8Tail(std::string_view text);

bool IsUnicodeLetter(uint32_t codepoint);      // \p{L}
bool IsUnicodeNumber(uint32_t codepoint);      // \p{N}
bool IsUnicodeWhitespace(uint32_t codepoint);  // \s: the White_Space property

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_TOKENIZER_UNICODE_H_
