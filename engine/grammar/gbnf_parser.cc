#include "engine/grammar/gbnf_parser.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace textgen::gbnf {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {
    out_.text = text;
  }

  absl::StatusOr<ParsedGrammar> Run() {
    if (static_cast<int64_t>(text_.size()) > limits_.max_input_bytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("grammar too complex: %d bytes of grammar text (limit %d)", text_.size(),
                          limits_.max_input_bytes));
    }
    SkipSpace(true);
    if (AtEnd()) return Error("empty grammar: no rules");
    while (!AtEnd()) {
      absl::Status s = ParseRule();
      if (!s.ok()) return s;
      SkipSpace(true);
    }
    return std::move(out_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  absl::Status ErrorAt(size_t offset, std::string_view message) const {
    auto [line, col] = out_.LineColumn(offset);
    return absl::InvalidArgumentError(absl::StrCat(line, ":", col, ": ", std::string(message)));
  }
  absl::Status Error(std::string_view message) const { return ErrorAt(pos_, message); }

  // Spaces, tabs and comments; newlines too when `newline_ok` (inside parentheses, after `::=`
  // and `|`), as llama.cpp's parse_space.
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      char c = Peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\r' && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  int32_t SymbolId(std::string_view name, size_t offset) {
    auto [it, inserted] =
        ids_.try_emplace(std::string(name), static_cast<int32_t>(out_.names.size()));
    if (inserted) {
      out_.names.emplace_back(name);
      out_.bodies.emplace_back();
      out_.defined.push_back(false);
      out_.first_use.push_back(offset);
    }
    return it->second;
  }

  absl::Status CheckRuleCount() const {
    if (static_cast<int64_t>(out_.names.size()) > limits_.max_rules) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "grammar too complex: more than %d rules (groups count as rules)", limits_.max_rules));
    }
    return absl::OkStatus();
  }

  absl::Status ParseRule() {
    size_t name_start = pos_;
    std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") {
      return Error(absl::StrCat("expected '::=' after rule name '", std::string(name), "'"));
    }
    pos_ += 3;
    SkipSpace(true);
    int32_t id = SymbolId(name, name_start);
    Expr body;
    absl::Status s = ParseAlternatives(std::string(name), /*nested=*/false, 0, &body);
    if (!s.ok()) return s;
    out_.bodies[id] = std::move(body);
    out_.defined[id] = true;
    if (AtEnd()) return absl::OkStatus();
    if (Peek() == '\r') {
      pos_ += Peek(1) == '\n' ? 2 : 1;
    } else if (Peek() == '\n') {
      ++pos_;
    } else {
      return Error(absl::StrCat("expected a newline or the end after rule '", std::string(name),
                                "', found '", std::string(1, Peek()), "'"));
    }
    return CheckRuleCount();
  }

  absl::Status ParseAlternatives(const std::string& rule_name, bool nested, int depth, Expr* out) {
    out->kind = Expr::Kind::kAlt;
    while (true) {
      Expr seq;
      absl::Status s = ParseSequence(rule_name, nested, depth, &seq);
      if (!s.ok()) return s;
      out->children.push_back(std::move(seq));
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace(true);
    }
    return absl::OkStatus();
  }

  // One character of a literal or class: a UTF-8 sequence or an escape.
  absl::StatusOr<uint32_t> ParseChar() {
    size_t start = pos_;
    unsigned char c = static_cast<unsigned char>(Peek());
    if (c == '\\') {
      char e = Peek(1);
      int hex_digits = 0;
      switch (e) {
        case 'x':
          hex_digits = 2;
          break;
        case 'u':
          hex_digits = 4;
          break;
        case 'U':
          hex_digits = 8;
          break;
        case 't':
          pos_ += 2;
          return '\t';
        case 'r':
          pos_ += 2;
          return '\r';
        case 'n':
          pos_ += 2;
          return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
          pos_ += 2;
          return static_cast<uint32_t>(e);
        case '\0':
          if (pos_ + 1 >= text_.size()) return Error("unexpected end of input after '\\'");
          [[fallthrough]];
        default:
          return Error(absl::StrCat("unknown escape '\\", std::string(1, e), "'"));
      }
      pos_ += 2;
      uint32_t value = 0;
      for (int i = 0; i < hex_digits; ++i) {
        char h = Peek();
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0 || AtEnd()) {
          return ErrorAt(start, absl::StrCat("expected ", hex_digits, " hex digits after '\\",
                                             std::string(1, e), "'"));
        }
        value = value * 16 + static_cast<uint32_t>(d);
        ++pos_;
      }
      if (value > 0x10FFFF) {
        return ErrorAt(start, absl::StrFormat("code point U+%X is beyond U+10FFFF", value));
      }
      if (value >= 0xD800 && value <= 0xDFFF) {
        return ErrorAt(start, absl::StrFormat("surrogate code point U+%04X", value));
      }
      return value;
    }
    // A UTF-8 sequence, which must be well formed.
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos_ + len > text_.size()) return Error("invalid UTF-8 in grammar");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      unsigned char cc = static_cast<unsigned char>(text_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) return Error("invalid UTF-8 in grammar");
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMinForLen[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Error("invalid UTF-8 in grammar");
    }
    pos_ += len;
    return cp;
  }

  absl::Status ParseLiteral(Expr* out) {
    size_t start = pos_;
    ++pos_;  // '"'
    out->kind = Expr::Kind::kLiteral;
    while (true) {
      if (AtEnd()) return ErrorAt(start, "unterminated string literal");
      if (Peek() == '"') break;
      if (Peek() == '\n' || Peek() == '\r') {
        return ErrorAt(start, "unterminated string literal (newline inside)");
      }
      absl::StatusOr<uint32_t> cp = ParseChar();
      if (!cp.ok()) return cp.status();
      AppendUtf8(*cp, &out->bytes);
      if (static_cast<int64_t>(out->bytes.size()) > limits_.max_literal_bytes) {
        return ErrorAt(start, absl::StrFormat("grammar too complex: literal longer than %d bytes",
                                              limits_.max_literal_bytes));
      }
    }
    ++pos_;
    return absl::OkStatus();
  }

  absl::Status ParseClass(Expr* out) {
    size_t start = pos_;
    ++pos_;  // '['
    out->kind = Expr::Kind::kClass;
    if (Peek() == '^') {
      out->negated = true;
      ++pos_;
    }
    while (true) {
      if (AtEnd()) return ErrorAt(start, "unterminated character class");
      if (Peek() == ']') break;
      size_t item = pos_;
      absl::StatusOr<uint32_t> lo = ParseChar();
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        absl::StatusOr<uint32_t> h = ParseChar();
        if (!h.ok()) return h.status();
        hi = *h;
        if (hi < *lo) {
          return ErrorAt(
              item, absl::StrFormat("invalid range U+%04X-U+%04X in character class", *lo, hi));
        }
      }
      out->ranges.emplace_back(*lo, hi);
      if (static_cast<int64_t>(out->ranges.size()) > limits_.max_literal_bytes) {
        return ErrorAt(start, "grammar too complex: character class too long");
      }
    }
    if (out->ranges.empty()) return ErrorAt(start, "empty character class");
    ++pos_;
    return absl::OkStatus();
  }

  absl::Status ParseToken(Expr* out) {
    size_t start = pos_;
    out->kind = Expr::Kind::kToken;
    if (Peek() == '!') {
      out->negated = true;
      ++pos_;
    }
    if (Peek() != '<') return Error("expected '<' after '!'");
    Grammar::TokenRef ref;
    if (Peek(1) == '[') {
      pos_ += 2;
      size_t digits = pos_;
      int64_t id = 0;
      while (IsDigit(Peek()) && !AtEnd()) {
        id = id * 10 + (Peek() - '0');
        if (id > 0x7FFFFFFF) return ErrorAt(digits, "token id too large");
        ++pos_;
      }
      if (pos_ == digits) return Error("expected a token id after '<['");
      if (Peek() != ']' || Peek(1) != '>') return Error("expected ']>' after the token id");
      pos_ += 2;
      ref.id = static_cast<int32_t>(id);
    } else {
      size_t end = text_.find('>', pos_ + 1);
      size_t newline = text_.find_first_of("\r\n", pos_ + 1);
      if (end == std::string_view::npos || (newline != std::string_view::npos && newline < end)) {
        return ErrorAt(start, "unterminated token reference (expected '>')");
      }
      ref.text = std::string(text_.substr(pos_, end + 1 - pos_));
      pos_ = end + 1;
    }
    out->token_ref = static_cast<int32_t>(out_.token_refs.size());
    out_.token_refs.push_back(std::move(ref));
    return absl::OkStatus();
  }

  absl::Status ParseRepetition(Expr* last) {
    size_t start = pos_;
    uint32_t min = 0, max = Expr::kUnbounded;
    char op = Peek();
    ++pos_;
    if (op == '+') {
      min = 1;
    } else if (op == '?') {
      max = 1;
    } else if (op == '{') {
      SkipSpace(false);
      auto parse_int = [&](uint32_t* v) -> absl::Status {
        if (!IsDigit(Peek()) || AtEnd()) return Error("expected a number in '{...}'");
        uint64_t n = 0;
        while (IsDigit(Peek()) && !AtEnd()) {
          n = n * 10 + static_cast<uint64_t>(Peek() - '0');
          if (n > static_cast<uint64_t>(limits_.max_repetition)) {
            return ErrorAt(start, absl::StrFormat("grammar too complex: repetition count above %d",
                                                  limits_.max_repetition));
          }
          ++pos_;
        }
        *v = static_cast<uint32_t>(n);
        return absl::OkStatus();
      };
      absl::Status s = parse_int(&min);
      if (!s.ok()) return s;
      SkipSpace(false);
      if (Peek() == '}') {
        max = min;
      } else if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        if (IsDigit(Peek())) {
          s = parse_int(&max);
          if (!s.ok()) return s;
          SkipSpace(false);
        }
        if (Peek() != '}') return Error("expected '}'");
      } else {
        return Error("expected ',' or '}' in '{...}'");
      }
      ++pos_;
      if (max < min) {
        return ErrorAt(
            start, absl::StrFormat("invalid repetition {%d,%d}: maximum below minimum", min, max));
      }
    }
    Expr rep;
    rep.kind = Expr::Kind::kRepeat;
    rep.min = min;
    rep.max = max;
    rep.children.push_back(std::move(*last));
    *last = std::move(rep);
    return absl::OkStatus();
  }

  absl::Status ParseSequence(const std::string& rule_name, bool nested, int depth, Expr* out) {
    out->kind = Expr::Kind::kSeq;
    bool have_item = false;  // a repetition operator applies to the previous item
    while (!AtEnd()) {
      char c = Peek();
      absl::Status s;
      Expr item;
      if (c == '"') {
        s = ParseLiteral(&item);
      } else if (c == '[') {
        s = ParseClass(&item);
      } else if (c == '<' || c == '!') {
        s = ParseToken(&item);
      } else if (IsNameChar(c)) {
        size_t name_start = pos_;
        std::string_view name = ParseName();
        item.kind = Expr::Kind::kRuleRef;
        item.rule = SymbolId(name, name_start);
        s = CheckRuleCount();
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          return Error(absl::StrFormat("grammar too complex: parentheses nested deeper than %d",
                                       limits_.max_nesting));
        }
        size_t open = pos_;
        ++pos_;
        SkipSpace(true);
        s = ParseAlternatives(rule_name, /*nested=*/true, depth + 1, &item);
        if (s.ok() && Peek() != ')') {
          s = AtEnd() ? ErrorAt(open, "unclosed '('") : Error("expected ')'");
        }
        if (s.ok()) ++pos_;
      } else if (c == '.') {
        ++pos_;
        item.kind = Expr::Kind::kClass;
        item.ranges.emplace_back(0, 0x10FFFF);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) {
          return Error(absl::StrCat("'", std::string(1, c), "' without a preceding item"));
        }
        s = ParseRepetition(&out->children.back());
        if (!s.ok()) return s;
        SkipSpace(nested);
        continue;
      } else {
        break;
      }
      if (!s.ok()) return s;
      out->children.push_back(std::move(item));
      have_item = true;
      SkipSpace(nested);
    }
    if (!AtEnd() && !nested && Peek() == ')') return Error("unexpected ')'");
    return absl::OkStatus();
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  ParsedGrammar out_;
  absl::flat_hash_map<std::string, int32_t> ids_;
};

}  // namespace

std::pair<int, int> ParsedGrammar::LineColumn(size_t offset) const {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

absl::StatusOr<ParsedGrammar> Parse(std::string_view text, const GrammarLimits& limits) {
  return Parser(text, limits).Run();
}

}  // namespace textgen::gbnf
