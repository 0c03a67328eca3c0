#include "engine/grammar/regex_parser.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

constexpr int kMaxDepth = 256;
constexpr int64_t kMaxCount = 1000000;

bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsHex(uint32_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
uint32_t HexValue(uint32_t c) {
  return IsDigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
}
bool IsAsciiAlnum(uint32_t c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
RegexNode CharsNode(CodePointSet set) {
  RegexNode node;
  node.kind = RegexNode::Kind::kChars;
  node.chars = std::move(set);
  return node;
}

RegexNode Combine(RegexNode::Kind kind, std::vector<RegexNode> kids) {
  if (kids.size() == 1) return std::move(kids[0]);
  RegexNode node;
  node.kind = kids.empty() ? RegexNode::Kind::kEmpty : kind;
  node.kids = std::move(kids);
  return node;
}

// One parse; positions are code-point offsets into the pattern.
class Parser {
 public:
  explicit Parser(std::vector<uint32_t> cps) : cps_(std::move(cps)) {}

  absl::StatusOr<ParsedRegex> Parse() {
    ParsedRegex out;
    while (true) {
      RegexBranch branch;
      TG_ASSIGN_OR_RETURN(branch.node, ParseAlternative(0, &branch));
      out.branches.push_back(std::move(branch));
      if (AtEnd()) break;
      if (Peek() == ')') return Error("unmatched )");
      ++pos_;  // '|'
    }
    return out;
  }

 private:
  bool AtEnd(size_t k = 0) const { return pos_ + k >= cps_.size(); }
  uint32_t Peek(size_t k = 0) const { return AtEnd(k) ? 0 : cps_[pos_ + k]; }

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid regex at offset ", pos_, ": ", std::string(what)));
  }
  absl::Status Unsupported(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported regex feature at offset ", pos_, ": ", std::string(what)));
  }

  // A sequence of terms up to '|', ')' or the end. `branch` is set at the top level, where
  // anchors are allowed at the ends.
  absl::StatusOr<RegexNode> ParseAlternative(int depth, RegexBranch* branch) {
    std::vector<RegexNode> terms;
    if (branch != nullptr && Peek() == '^' && !AtEnd()) {
      ++pos_;
      branch->anchored_start = true;
    }
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const uint32_t c = Peek();
      if (c == '^') return Unsupported("anchor ^ anywhere but the start of the pattern");
      if (c == '$') {
        const bool at_end = AtEnd(1) || Peek(1) == '|';
        if (branch == nullptr || !at_end) {
          return Unsupported("anchor $ anywhere but the end of the pattern");
        }
        ++pos_;
        branch->anchored_end = true;
        break;
      }
      TG_ASSIGN_OR_RETURN(RegexNode atom, ParseAtom(depth));
      TG_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      terms.push_back(std::move(atom));
    }
    return Combine(RegexNode::Kind::kSeq, std::move(terms));
  }

  absl::StatusOr<RegexNode> ParseDisjunction(int depth) {
    std::vector<RegexNode> alts;
    while (true) {
      TG_ASSIGN_OR_RETURN(RegexNode alt, ParseAlternative(depth, nullptr));
      alts.push_back(std::move(alt));
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    return Combine(RegexNode::Kind::kAlt, std::move(alts));
  }

  // {m}, {m,} or {m,n} at pos_: true and the counts if it is one. `{,n}` is refused: Python
  // reads it as {0,n}, ECMA-262 as the literal text.
  absl::StatusOr<bool> ParseBraces(size_t& len, int64_t& min, int64_t& max) const {
    size_t i = pos_ + 1;
    const auto number = [&](int64_t& value) {
      const size_t start = i;
      value = 0;
      while (i < cps_.size() && IsDigit(cps_[i])) {
        value = std::min<int64_t>(value * 10 + (cps_[i] - '0'), kMaxCount + 1);
        ++i;
      }
      return i > start;
    };
    if (i < cps_.size() && cps_[i] == ',') return Unsupported("the quantifier {,n}");
    if (!number(min)) return false;
    max = min;
    if (i < cps_.size() && cps_[i] == ',') {
      ++i;
      if (!number(max)) max = -1;
    }
    if (i >= cps_.size() || cps_[i] != '}') return false;
    len = i + 1 - pos_;
    if (min > kMaxCount || max > kMaxCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("regex too complex: a repetition count above ", kMaxCount));
    }
    if (max >= 0 && min > max) return Error("numbers out of order in {} quantifier");
    return true;
  }

  absl::StatusOr<RegexNode> ParseQuantifiers(RegexNode atom) {
    int64_t min, max;
    size_t len = 1;
    const uint32_t c = Peek();
    if (AtEnd()) return atom;
    if (c == '*') {
      min = 0, max = -1;
    } else if (c == '+') {
      min = 1, max = -1;
    } else if (c == '?') {
      min = 0, max = 1;
    } else if (c == '{') {
      TG_ASSIGN_OR_RETURN(const bool braces, ParseBraces(len, min, max));
      if (!braces) return atom;
    } else {
      return atom;
    }
    pos_ += len;
    if (Peek() == '?' && !AtEnd()) ++pos_;  // lazy: the same language
    if (!AtEnd()) {
      const uint32_t next = Peek();
      if (next == '+') return Unsupported("possessive quantifier");
      size_t l2;
      int64_t m2, x2;
      bool braces = false;
      if (next == '{') {
        TG_ASSIGN_OR_RETURN(braces, ParseBraces(l2, m2, x2));
      }
      if (next == '*' || next == '?' || braces) return Error("nothing to repeat");
    }
    RegexNode node;
    node.kind = RegexNode::Kind::kRepeat;
    node.min = min;
    node.max = max;
    node.kids.push_back(std::move(atom));
    return node;
  }

  absl::StatusOr<RegexNode> ParseAtom(int depth) {
    const uint32_t c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(depth);
      case '.':
        ++pos_;
        return CharsNode(DotSet());
      case '[':
        return ParseClass();
      case '\\':
        return ParseEscape();
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '{': {
        size_t len;
        int64_t min, max;
        TG_ASSIGN_OR_RETURN(const bool braces, ParseBraces(len, min, max));
        if (braces) return Error("nothing to repeat");
        break;  // a literal '{'
      }
      default:
        break;
    }
    ++pos_;
    return CharsNode(CodePointSet::Of(c));
  }

  absl::StatusOr<RegexNode> ParseGroup(int depth) {
    if (depth + 1 > kMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("regex too complex: groups nested deeper than ", kMaxDepth));
    }
    if (Peek(1) == '?') {  // errors at the '('
      const uint32_t kind = Peek(2);
      if (kind == '=' || kind == '!') return Unsupported("lookahead assertion");
      if (kind == '<' && (Peek(3) == '=' || Peek(3) == '!')) {
        return Unsupported("lookbehind assertion");
      }
      if (kind == 'P') return Unsupported("Python-style named group (?P...)");
      if (kind != ':' && kind != '<') return Unsupported("inline flags or group extension (?...)");
      pos_ += 3;
      if (kind == '<') {
        while (!AtEnd() && Peek() != '>') {
          if (!IsAsciiAlnum(Peek()) && Peek() != '_' && Peek() != '$') {
            return Error("bad group name");
          }
          ++pos_;
        }
        if (AtEnd()) return Error("unterminated group name");
        ++pos_;
      }
    } else {
      ++pos_;  // '('
    }
    TG_ASSIGN_OR_RETURN(RegexNode inner, ParseDisjunction(depth + 1));
    if (Peek() != ')' || AtEnd()) return Error("missing )");
    ++pos_;
    return inner;
  }

  // The code point of a character escape after '\' (pos_ at the letter); advances pos_.
  absl::StatusOr<uint32_t> ParseCharEscape() {
    const size_t at = pos_;
    const uint32_t c = Peek();
    const auto unsupported = [&](std::string_view what) {
      pos_ = at;  // errors name the escape's letter
      return Unsupported(what);
    };
    ++pos_;
    switch (c) {
      case 't':
        return 0x09;
      case 'n':
        return 0x0A;
      case 'v':
        return 0x0B;
      case 'f':
        return 0x0C;
      case 'r':
        return 0x0D;
      case '0':
        if (IsDigit(Peek()) && !AtEnd()) return unsupported("octal escape");
        return 0;
      case 'c': {
        const uint32_t l = Peek();
        if (AtEnd() || !((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) {
          return Error("\\c must be followed by a letter");
        }
        ++pos_;
        return l % 32;
      }
      case 'x':
      case 'u': {
        const size_t n = c == 'x' ? 2 : 4;
        if (c == 'u' && Peek() == '{') return unsupported("\\u{...} escape");
        uint32_t v = 0;
        for (size_t k = 0; k < n; ++k) {
          if (AtEnd(k) || !IsHex(Peek(k))) {
            return unsupported(c == 'x' ? "\\x without two hex digits"
                                        : "\\u without four hex digits");
          }
          v = v * 16 + HexValue(Peek(k));
        }
        pos_ += n;
        if (v >= 0xD800 && v <= 0xDFFF) return unsupported("surrogate escape \\uD800-\\uDFFF");
        return v;
      }
      default:
        break;
    }
    if (c < 0x80 && IsAsciiAlnum(c)) {
      return unsupported(absl::StrFormat("escape \\%c", static_cast<char>(c)));
    }
    return c;  // an escaped syntax or punctuation character, or a non-ASCII one: itself
  }

  absl::StatusOr<RegexNode> ParseEscape() {
    ++pos_;  // '\'
    if (AtEnd()) return Error("\\ at the end of the pattern");
    const uint32_t c = Peek();
    if (c < 0x80 &&
        std::string_view("dDwWsS").find(static_cast<char>(c)) != std::string_view::npos) {
      ++pos_;
      return CharsNode(NarrowClassEscape(static_cast<char>(c)));
    }
    if (c == 'b' || c == 'B') return Unsupported("word boundary assertion \\b or \\B");
    if (c >= '1' && c <= '9') return Unsupported("backreference");
    if (c == 'k') return Unsupported("named backreference \\k");
    if (c == 'p' || c == 'P') return Unsupported("Unicode property escape \\p or \\P");
    TG_ASSIGN_OR_RETURN(const uint32_t cp, ParseCharEscape());
    return CharsNode(CodePointSet::Of(cp));
  }

  // One class member: a code point, or (is_set) one of \d \w \s \D \W \S.
  absl::Status ParseClassAtom(uint32_t& cp, bool& is_set, char& set_kind) {
    is_set = false;
    const uint32_t c = Peek();
    ++pos_;
    if (c != '\\') {
      cp = c;
      return absl::OkStatus();
    }
    if (AtEnd()) return Error("unterminated character class");
    const uint32_t e = Peek();
    if (e < 0x80 &&
        std::string_view("dDwWsS").find(static_cast<char>(e)) != std::string_view::npos) {
      ++pos_;
      is_set = true;
      set_kind = static_cast<char>(e);
      return absl::OkStatus();
    }
    if (e == 'b') {
      ++pos_;
      cp = 0x08;  // backspace inside a class, in both dialects
      return absl::OkStatus();
    }
    if (e == '-') {
      ++pos_;
      cp = '-';
      return absl::OkStatus();
    }
    if (e >= '1' && e <= '9') return Unsupported("octal or backreference escape in a class");
    if (e == 'p' || e == 'P') return Unsupported("Unicode property escape \\p or \\P");
    TG_ASSIGN_OR_RETURN(cp, ParseCharEscape());
    return absl::OkStatus();
  }

  absl::StatusOr<RegexNode> ParseClass() {
    ++pos_;  // '['
    bool negated = false;
    if (Peek() == '^' && !AtEnd()) {
      negated = true;
      ++pos_;
    }
    if (Peek() == ']' && !AtEnd()) {
      return Unsupported("a class starting with ] ([] and [^] differ between dialects)");
    }
    CodePointSet positive;  // members as matched positively (narrow escapes)
    CodePointSet negative;  // members as excluded when negated (wide escapes)
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      if (Peek() == ']') {
        ++pos_;
        break;
      }
      uint32_t lo, hi;
      bool lo_set, hi_set;
      char lo_kind, hi_kind;
      TG_RETURN_IF_ERROR(ParseClassAtom(lo, lo_set, lo_kind));
      if (Peek() == '-' && !AtEnd(1) && Peek(1) != ']') {
        ++pos_;
        TG_RETURN_IF_ERROR(ParseClassAtom(hi, hi_set, hi_kind));
        if (lo_set || hi_set) return Unsupported("a class escape as a range end");
        if (lo > hi) return Error("range out of order in character class");
        positive.Add(lo, hi);
        negative.Add(lo, hi);
      } else if (lo_set) {
        positive.AddSet(NarrowClassEscape(lo_kind));
        negative.AddSet(WideClassEscape(lo_kind));
      } else {
        positive.Add(lo, lo);
        negative.Add(lo, lo);
      }
    }
    return CharsNode(negated ? negative.Complement() : std::move(positive));
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

bool ParsedRegex::fully_anchored() const {
  for (const RegexBranch& b : branches) {
    if (!b.anchored_start || !b.anchored_end) return false;
  }
  return true;
}

absl::StatusOr<ParsedRegex> ParseRegex(std::string_view pattern) {
  std::vector<uint32_t> cps;
  size_t pos = 0;
  while (pos < pattern.size()) {
    uint32_t cp;
    if (!DecodeUtf8(pattern, pos, cp)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid regex: not valid UTF-8 at byte ", pos));
    }
    cps.push_back(cp);
  }
  return Parser(std::move(cps)).Parse();
}

void RegexLengthBounds(const RegexNode& node, int64_t& min, int64_t& max) {
  constexpr int64_t kCap = int64_t{1} << 40;
  switch (node.kind) {
    case RegexNode::Kind::kEmpty:
      min = max = 0;
      return;
    case RegexNode::Kind::kChars:
      min = max = node.chars.empty() ? 0 : 1;
      return;
    case RegexNode::Kind::kSeq:
      min = max = 0;
      for (const RegexNode& k : node.kids) {
        int64_t a, b;
        RegexLengthBounds(k, a, b);
        min = std::min(kCap, min + a);
        max = (max < 0 || b < 0) ? -1 : std::min(kCap, max + b);
      }
      return;
    case RegexNode::Kind::kAlt:
      min = kCap, max = 0;
      for (const RegexNode& k : node.kids) {
        int64_t a, b;
        RegexLengthBounds(k, a, b);
        min = std::min(min, a);
        max = (max < 0 || b < 0) ? -1 : std::max(max, b);
      }
      return;
    case RegexNode::Kind::kRepeat: {
      int64_t a, b;
      RegexLengthBounds(node.kids[0], a, b);
      min = std::min(kCap, a * node.min);
      max = (b == 0) ? 0 : (b < 0 || node.max < 0) ? -1 : std::min(kCap, b * node.max);
      return;
    }
  }
}

namespace {

// The fixed-length forms of a part when there are few: x{m,n} of a fixed-length x as x{m} ...
// x{n}, or the alternatives of an alternation of fixed-length parts.
std::optional<std::vector<RegexNode>> FixedForms(const RegexNode& node) {
  constexpr int64_t kMaxForms = 16;
  int64_t a, b;
  RegexLengthBounds(node, a, b);
  if (a == b) return std::vector<RegexNode>{node};
  std::vector<RegexNode> forms;
  if (node.kind == RegexNode::Kind::kRepeat && node.max >= 0 && node.max - node.min < kMaxForms) {
    int64_t ca, cb;
    RegexLengthBounds(node.kids[0], ca, cb);
    if (ca != cb) return std::nullopt;
    for (int64_t c = node.min; c <= node.max; ++c) {
      RegexNode f = node;
      f.min = f.max = c;
      forms.push_back(std::move(f));
    }
    return forms;
  }
  if (node.kind == RegexNode::Kind::kAlt && static_cast<int64_t>(node.kids.size()) <= kMaxForms) {
    for (const RegexNode& k : node.kids) {
      int64_t ka, kb;
      RegexLengthBounds(k, ka, kb);
      if (ka != kb) return std::nullopt;
      forms.push_back(k);
    }
    return forms;
  }
  return std::nullopt;
}

// A sequence with several parts of variable length: the alternatives of every choice of fixed
// forms for all of them but one (at most 64 choices), each constrained in turn.
std::optional<RegexNode> SplitVariableParts(const RegexNode& seq, int64_t lo, int64_t hi) {
  std::vector<std::vector<RegexNode>> forms;
  int open = -1;  // the one part left variable
  size_t choices = 1;
  for (size_t i = 0; i < seq.kids.size(); ++i) {
    std::optional<std::vector<RegexNode>> f = FixedForms(seq.kids[i]);
    if (!f) {
      if (open >= 0) return std::nullopt;
      open = static_cast<int>(i);
      f = std::vector<RegexNode>{seq.kids[i]};
    }
    choices *= f->size();
    if (choices > 64) return std::nullopt;
    forms.push_back(*std::move(f));
  }
  RegexNode alt;
  alt.kind = RegexNode::Kind::kAlt;
  std::vector<size_t> pick(forms.size(), 0);
  for (size_t c = 0; c < choices; ++c) {
    RegexNode one = seq;
    for (size_t i = 0, rest = c; i < forms.size(); ++i) {
      one.kids[i] = forms[i][rest % forms[i].size()];
      rest /= forms[i].size();
    }
    std::optional<RegexNode> r = ConstrainLength(one, lo, hi);
    if (!r) return std::nullopt;
    alt.kids.push_back(*std::move(r));
  }
  return alt;
}

}  // namespace

std::optional<RegexNode> ConstrainLength(const RegexNode& node, int64_t lo, int64_t hi) {
  const RegexNode nothing = CharsNode(CodePointSet());
  int64_t a, b;
  RegexLengthBounds(node, a, b);
  if (a >= lo && (hi < 0 || (b >= 0 && b <= hi))) return node;
  if ((hi >= 0 && a > hi) || (b >= 0 && b < lo)) return nothing;
  switch (node.kind) {
    case RegexNode::Kind::kRepeat: {
      int64_t ca, cb;
      RegexLengthBounds(node.kids[0], ca, cb);
      if (ca != cb || ca < 1) return std::nullopt;
      RegexNode out = node;
      out.min = std::max(node.min, (lo + ca - 1) / ca);
      if (hi >= 0) out.max = node.max < 0 ? hi / ca : std::min(node.max, hi / ca);
      if (out.max >= 0 && out.min > out.max) return nothing;
      return out;
    }
    case RegexNode::Kind::kSeq: {
      int64_t fixed = 0;
      int variable = -1;
      for (size_t i = 0; i < node.kids.size(); ++i) {
        int64_t ka, kb;
        RegexLengthBounds(node.kids[i], ka, kb);
        if (ka == kb) {
          fixed += ka;
        } else if (variable >= 0) {
          return SplitVariableParts(node, lo, hi);  // two parts of variable length
        } else {
          variable = static_cast<int>(i);
        }
      }
      if (variable < 0 || (hi >= 0 && hi < fixed)) return nothing;
      std::optional<RegexNode> part = ConstrainLength(
          node.kids[variable], std::max<int64_t>(0, lo - fixed), hi < 0 ? -1 : hi - fixed);
      if (!part) return std::nullopt;
      RegexNode out = node;
      out.kids[variable] = *std::move(part);
      return out;
    }
    case RegexNode::Kind::kAlt: {
      RegexNode out = node;
      out.kids.clear();
      for (const RegexNode& k : node.kids) {
        std::optional<RegexNode> r = ConstrainLength(k, lo, hi);
        if (!r) return std::nullopt;
        out.kids.push_back(*std::move(r));
      }
      return out;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace textgen::json_schema_internal
