// The lexer: jinja2's lexer.py rules for data, tags and whitespace control, by hand.
#include <cctype>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/chat/jinja_parser.h"
#include "engine/chat/jinja_text.h"

namespace textgen::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// jinja2 turns every \r\n, \r and \n of the source into \n and drops one trailing newline.
std::string NormalizeSource(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's str.rstrip() on UTF-8 text.
std::string RStrip(std::string_view s) { return PyStrip(s, nullptr, false, true); }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(NormalizeSource(src)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;  // the previous match ended with a newline (or none yet)
    while (pos_ < src_.size()) {
      const size_t start = FindTagStart(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        Emit(Token::Type::kData, text);
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the spaces between the line start and a block or comment tag.
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            PyStrip(std::string_view(text).substr(l_pos), nullptr, true, false).empty()) {
          text.resize(l_pos);
        }
      }
      Emit(Token::Type::kData, text);
      line_ += Count(pos_, start);
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::Status st;
      if (kind == '#') {
        st = Comment();
      } else if (kind == '%' && IsRaw()) {
        st = Raw();
      } else {
        st = Tag(kind == '{');
      }
      if (!st.ok()) return st;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back(Token{Token::Type::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  int Count(size_t from, size_t to) const {
    int n = 0;
    for (size_t i = from; i < to && i < src_.size(); ++i) n += src_[i] == '\n';
    return n;
  }

  void Emit(Token::Type type, std::string text) {
    if (type == Token::Type::kData && text.empty()) return;
    tokens_.push_back(Token{type, std::move(text), line_});
  }

  // After a tag's end: `-` eats all following whitespace, trim_blocks one newline.
  void AfterEnd(char sign, bool block) {
    if (sign == '-') {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
    } else if (sign != '+' && block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
  }

  absl::Status Comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": unterminated comment"));
    }
    const char sign = end > pos_ ? src_[end - 1] : '\0';
    line_ += Count(pos_, end);
    pos_ = end + 2;
    AfterEnd(sign, /*block=*/true);
    return absl::OkStatus();
  }

  bool IsRaw() const {
    size_t p = pos_;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  // {% raw %}...{% endraw %}: the text in between is data, untouched.
  absl::Status Raw() {
    size_t p = src_.find("%}", pos_);
    const char open_sign = src_[p - 1];
    pos_ = p + 2;
    AfterEnd(open_sign, /*block=*/true);
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      const char sign = r < src_.size() ? src_[r] : '\0';
      if (sign == '-' || sign == '+') ++r;
      while (r < src_.size() && IsSpace(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && IsSpace(src_[r])) ++r;
      const char end_sign = r < src_.size() ? src_[r] : '\0';
      if (end_sign == '-' || end_sign == '+') ++r;
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, q - pos_);
      if (sign == '-') text = RStrip(text);
      line_ += Count(pos_, r);
      Emit(Token::Type::kData, std::move(text));
      pos_ = r + 2;
      AfterEnd(end_sign, /*block=*/true);
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": unterminated raw block"));
  }

  absl::Status Tag(bool variable) {
    Emit(variable ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "");
    int depth = 0;
    const std::string end = variable ? "}}" : "%}";
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_, ": unexpected end of template, expected '", end, "'"));
      }
      if (depth == 0) {
        const char c = src_[pos_];
        if ((c == '-' || c == '+') && src_.compare(pos_ + 1, 2, end) == 0 &&
            (c == '-' || !variable)) {
          pos_ += 3;
          tokens_.push_back(
              Token{variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "", line_});
          AfterEnd(c, !variable);
          return absl::OkStatus();
        }
        if (src_.compare(pos_, 2, end) == 0) {
          pos_ += 2;
          tokens_.push_back(
              Token{variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "", line_});
          AfterEnd('\0', !variable);
          return absl::OkStatus();
        }
      }
      absl::Status st = Operand(depth);
      if (!st.ok()) return st;
    }
  }

  absl::Status Operand(int& depth) {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
      tokens_.push_back(Token{Token::Type::kName, src_.substr(pos_, e - pos_), line_});
      pos_ = e;
      return absl::OkStatus();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return Number();
    if (c == '\'' || c == '"') return String(c);
    static const char* const kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kOps2) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{Token::Type::kOp, op, line_});
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|;").find(c) == std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_, ": unexpected character '", std::string(1, c), "'"));
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back(Token{Token::Type::kOp, std::string(1, c), line_});
    ++pos_;
    return absl::OkStatus();
  }

  absl::Status Number() {
    auto digits = [&](size_t p) {
      while (p < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_'))
        ++p;
      return p;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    // `loop.index0`-style attribute chains never form floats (jinja2's (?<!\.) guard).
    const bool after_dot =
        !tokens_.empty() && tokens_.back().type == Token::Type::kOp && tokens_.back().text == ".";
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        e = digits(p);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, text, line_};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_, ": integer too large: ", text));
      }
    }
    tokens_.push_back(std::move(t));
    pos_ = e;
    return absl::OkStatus();
  }

  // A string literal with Python's escapes (jinja2 decodes them with unicode-escape).
  absl::Status String(char quote) {
    std::u32string out;
    const int start_line = line_;
    size_t p = pos_ + 1;
    std::string raw;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\' && p + 1 < src_.size()) {
        raw.push_back(src_[p++]);
      }
      raw.push_back(src_[p++]);
    }
    if (p >= src_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", start_line, ": unterminated string"));
    }
    line_ += Count(pos_, p);
    pos_ = p + 1;
    const std::u32string cps = Utf8ToCodepoints(raw);
    for (size_t i = 0; i < cps.size(); ++i) {
      if (cps[i] != '\\' || i + 1 == cps.size()) {
        out.push_back(cps[i]);
        continue;
      }
      const char32_t e = cps[++i];
      auto hex = [&](int n) -> char32_t {
        char32_t v = 0;
        for (int k = 0; k < n; ++k) {
          if (i + 1 >= cps.size() || !std::isxdigit(static_cast<int>(cps[i + 1] & 0x7F)) ||
              cps[i + 1] > 0x7F) {
            return static_cast<char32_t>(-1);
          }
          const char32_t d = cps[++i];
          v = v * 16 + (d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
        }
        return v;
      };
      char32_t v;
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U':
          v = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (v == static_cast<char32_t>(-1)) {
            return absl::InvalidArgumentError(absl::StrCat("line ", start_line, ": truncated \\",
                                                           std::string(1, static_cast<char>(e)),
                                                           " escape in a string"));
          }
          out.push_back(v);
          break;
        default:
          if (e >= '0' && e <= '7') {
            v = e - '0';
            for (int k = 0; k < 2 && i + 1 < cps.size() && cps[i + 1] >= '0' && cps[i + 1] <= '7';
                 ++k) {
              v = v * 8 + (cps[++i] - '0');
            }
            out.push_back(v);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    tokens_.push_back(Token{Token::Type::kString, CodepointsToUtf8(out), start_line});
    return absl::OkStatus();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) { return Lexer(source).Run(); }

}  // namespace textgen::jinja
