// JSON read one byte at a time, as a model writes it: whether each byte can continue a valid
// value (JsonScanner), and a string's decoded text as its bytes arrive (JsonStringDecoder).
// The tool-call readers use them to stream arguments that are always a prefix of valid JSON.
#ifndef TEXTGEN_ENGINE_CHAT_JSON_STREAM_H_
#define TEXTGEN_ENGINE_CHAT_JSON_STREAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace textgen {

// Validates one JSON value (RFC 8259; no leading whitespace: the first byte starts the value)
// byte by byte. Not thread-safe; cheap to copy.
class JsonScanner {
 public:
  enum class Result {
    kContinue,    // the byte is part of the value; more is needed
    kDone,        // the byte completed the value
    kDoneBefore,  // the value (a number) had ended before this byte, which is not part of it
    kError,       // the byte cannot continue a valid value (the scanner is then unusable)
  };
  Result Push(char c);
  // Whether the bytes so far could form a complete value if the text ended here (a number).
  bool CanEndHere() const;
  // Nesting depth of open objects and arrays.
  int depth() const { return static_cast<int>(stack_.size()); }

 private:
  enum class State : uint8_t {
    kValue,
    kAfterValue,
    kKeyOrEnd,
    kKey,
    kColon,
    kValueOrEnd,
    kString,
    kEscape,
    kUnicode,
    kMinus,
    kZero,
    kInt,
    kDot,
    kFrac,
    kExp,
    kExpSign,
    kExpDigits,
    kLiteral,
    kEnd,
  };
  Result ValueStart(char c);
  Result CloseValue();  // a value ended: back to the container, or done at the top
  Result NumberEnd(char c);

  State state_ = State::kValue;
  bool string_is_key_ = false;
  int hex_left_ = 0;
  std::string_view literal_rest_;
  std::vector<char> stack_;  // '{' or '['
};

// Decodes a JSON string's body (the bytes after its opening quote) into UTF-8, byte by byte;
// escapes (\n, \uXXXX with surrogate pairs, ...) are decoded once complete. Rejects control
// characters, bad escapes and unpaired surrogates. Not thread-safe.
class JsonStringDecoder {
 public:
  enum class Result { kContinue, kDone, kError };
  // Appends what `c` completes to `out`. kDone: `c` was the closing quote.
  Result Push(char c, std::string* out);

 private:
  enum class State : uint8_t { kChars, kEscape, kHex, kLowEscape, kLowU };
  State state_ = State::kChars;
  int hex_left_ = 0;
  uint32_t code_ = 0;
  uint32_t high_ = 0;  // a high surrogate waiting for its low half
};

// `text` as a JSON string body (no quotes): ", \ and control characters escaped, UTF-8 kept.
void AppendJsonEscaped(std::string_view text, std::string* out);

// Whether `c` is JSON whitespace.
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_CHAT_JSON_STREAM_H_
