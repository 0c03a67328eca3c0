#include "engine/chat/json_stream.h"

#include "engine/tokenizer/unicode.h"

namespace textgen {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

JsonScanner::Result JsonScanner::ValueStart(char c) {
  switch (c) {
    case '{':
      stack_.push_back('{');
      state_ = State::kKeyOrEnd;
      return Result::kContinue;
    case '[':
      stack_.push_back('[');
      state_ = State::kValueOrEnd;
      return Result::kContinue;
    case '"':
      string_is_key_ = false;
      state_ = State::kString;
      return Result::kContinue;
    case '-':
      state_ = State::kMinus;
      return Result::kContinue;
    case '0':
      state_ = State::kZero;
      return Result::kContinue;
    case 't':
      literal_rest_ = "rue";
      state_ = State::kLiteral;
      return Result::kContinue;
    case 'f':
      literal_rest_ = "alse";
      state_ = State::kLiteral;
      return Result::kContinue;
    case 'n':
      literal_rest_ = "ull";
      state_ = State::kLiteral;
      return Result::kContinue;
    default:
      if (c >= '1' && c <= '9') {
        state_ = State::kInt;
        return Result::kContinue;
      }
      state_ = State::kEnd;
      return Result::kError;
  }
}

JsonScanner::Result JsonScanner::CloseValue() {
  if (stack_.empty()) {
    state_ = State::kEnd;
    return Result::kDone;
  }
  state_ = State::kAfterValue;
  return Result::kContinue;
}

// A number ends at the first byte that cannot continue it; that byte belongs to the container
// (or, at the top, to whatever follows the value).
JsonScanner::Result JsonScanner::NumberEnd(char c) {
  if (stack_.empty()) {
    state_ = State::kEnd;
    return Result::kDoneBefore;
  }
  state_ = State::kAfterValue;
  return Push(c);
}

bool JsonScanner::CanEndHere() const {
  if (!stack_.empty()) return false;
  return state_ == State::kZero || state_ == State::kInt || state_ == State::kFrac ||
         state_ == State::kExpDigits;
}

JsonScanner::Result JsonScanner::Push(char c) {
  switch (state_) {
    case State::kValue:
      if (!stack_.empty() && IsJsonSpace(c)) return Result::kContinue;
      return ValueStart(c);
    case State::kValueOrEnd:
      if (IsJsonSpace(c)) return Result::kContinue;
      if (c == ']') {
        stack_.pop_back();
        return CloseValue();
      }
      return ValueStart(c);
    case State::kKeyOrEnd:
      if (IsJsonSpace(c)) return Result::kContinue;
      if (c == '}') {
        stack_.pop_back();
        return CloseValue();
      }
      [[fallthrough]];
    case State::kKey:
      if (IsJsonSpace(c)) return Result::kContinue;
      if (c != '"') break;
      string_is_key_ = true;
      state_ = State::kString;
      return Result::kContinue;
    case State::kColon:
      if (IsJsonSpace(c)) return Result::kContinue;
      if (c != ':') break;
      state_ = State::kValue;
      return Result::kContinue;
    case State::kAfterValue:
      if (IsJsonSpace(c)) return Result::kContinue;
      if (c == ',') {
        state_ = stack_.back() == '{' ? State::kKey : State::kValue;
        return Result::kContinue;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        stack_.pop_back();
        return CloseValue();
      }
      break;
    case State::kString:
      if (c == '"') {
        if (string_is_key_) {
          state_ = State::kColon;
          return Result::kContinue;
        }
        return CloseValue();
      }
      if (c == '\\') {
        state_ = State::kEscape;
        return Result::kContinue;
      }
      if (static_cast<unsigned char>(c) < 0x20) break;
      return Result::kContinue;
    case State::kEscape:
      if (c == 'u') {
        hex_left_ = 4;
        state_ = State::kUnicode;
        return Result::kContinue;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
          c == 't') {
        state_ = State::kString;
        return Result::kContinue;
      }
      break;
    case State::kUnicode:
      if (HexValue(c) < 0) break;
      if (--hex_left_ == 0) state_ = State::kString;
      return Result::kContinue;
    case State::kMinus:
      if (c == '0') {
        state_ = State::kZero;
        return Result::kContinue;
      }
      if (IsDigit(c)) {
        state_ = State::kInt;
        return Result::kContinue;
      }
      break;
    case State::kZero:
    case State::kInt:
      if (state_ == State::kInt && IsDigit(c)) return Result::kContinue;
      if (c == '.') {
        state_ = State::kDot;
        return Result::kContinue;
      }
      if (c == 'e' || c == 'E') {
        state_ = State::kExp;
        return Result::kContinue;
      }
      return NumberEnd(c);
    case State::kDot:
      if (!IsDigit(c)) break;
      state_ = State::kFrac;
      return Result::kContinue;
    case State::kFrac:
      if (IsDigit(c)) return Result::kContinue;
      if (c == 'e' || c == 'E') {
        state_ = State::kExp;
        return Result::kContinue;
      }
      return NumberEnd(c);
    case State::kExp:
      if (c == '+' || c == '-') {
        state_ = State::kExpSign;
        return Result::kContinue;
      }
      [[fallthrough]];
    case State::kExpSign:
      if (!IsDigit(c)) break;
      state_ = State::kExpDigits;
      return Result::kContinue;
    case State::kExpDigits:
      if (IsDigit(c)) return Result::kContinue;
      return NumberEnd(c);
    case State::kLiteral:
      if (literal_rest_.empty() || c != literal_rest_.front()) break;
      literal_rest_.remove_prefix(1);
      if (literal_rest_.empty()) return CloseValue();
      return Result::kContinue;
    case State::kEnd:
      break;
  }
  state_ = State::kEnd;
  return Result::kError;
}

JsonStringDecoder::Result JsonStringDecoder::Push(char c, std::string* out) {
  switch (state_) {
    case State::kChars:
      if (high_ != 0) return Result::kError;  // a high surrogate must be followed by \u
      if (c == '"') return Result::kDone;
      if (c == '\\') {
        state_ = State::kEscape;
        return Result::kContinue;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Result::kError;
      out->push_back(c);
      return Result::kContinue;
    case State::kEscape: {
      char decoded = 0;
      switch (c) {
        case '"':
          decoded = '"';
          break;
        case '\\':
          decoded = '\\';
          break;
        case '/':
          decoded = '/';
          break;
        case 'b':
          decoded = '\b';
          break;
        case 'f':
          decoded = '\f';
          break;
        case 'n':
          decoded = '\n';
          break;
        case 'r':
          decoded = '\r';
          break;
        case 't':
          decoded = '\t';
          break;
        case 'u':
          state_ = State::kHex;
          hex_left_ = 4;
          code_ = 0;
          return Result::kContinue;
        default:
          return Result::kError;
      }
      out->push_back(decoded);
      state_ = State::kChars;
      return Result::kContinue;
    }
    case State::kLowEscape:
      if (c != '\\') return Result::kError;
      state_ = State::kLowU;
      return Result::kContinue;
    case State::kLowU:
      if (c != 'u') return Result::kError;
      state_ = State::kHex;
      hex_left_ = 4;
      code_ = 0;
      return Result::kContinue;
    case State::kHex: {
      const int v = HexValue(c);
      if (v < 0) return Result::kError;
      code_ = code_ * 16 + static_cast<uint32_t>(v);
      if (--hex_left_ > 0) return Result::kContinue;
      if (high_ != 0) {
        if (code_ < 0xDC00 || code_ > 0xDFFF) return Result::kError;
        AppendUtf8(0x10000 + ((high_ - 0xD800) << 10) + (code_ - 0xDC00), out);
        high_ = 0;
        state_ = State::kChars;
      } else if (code_ >= 0xD800 && code_ <= 0xDBFF) {
        high_ = code_;
        state_ = State::kLowEscape;
      } else if (code_ >= 0xDC00 && code_ <= 0xDFFF) {
        return Result::kError;
      } else {
        AppendUtf8(code_, out);
        state_ = State::kChars;
      }
      return Result::kContinue;
    }
  }
  return Result::kError;
}

void AppendJsonEscaped(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[(c >> 4) & 0xF]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(c);
        }
    }
  }
}

}  // namespace textgen
