#include "engine/grammar/json_schema_pieces.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace textgen::json_schema_internal {
namespace {

// The characters JSON strings may hold raw: everything but ", \ and the controls U+0000-001F.
const CodePointSet& RawStringChars() {
  static const CodePointSet* set = new CodePointSet(CodePointSet::Range(0x20, kMaxCodePoint)
                                                        .Minus(CodePointSet::Of('"'))
                                                        .Minus(CodePointSet::Of('\\')));
  return *set;
}

// The short escapes, by code point.
const char* ShortEscape(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case 0x08:
      return "\\b";
    case 0x0C:
      return "\\f";
    case 0x0A:
      return "\\n";
    case 0x0D:
      return "\\r";
    case 0x09:
      return "\\t";
    default:
      return nullptr;
  }
}

}  // namespace

Expr JsonPieces::Shared(std::string_view name, Expr (JsonPieces::*build)()) {
  const std::string key(name);
  auto it = shared_.find(key);
  if (it != shared_.end()) return it->second;
  const int rule = b_.NewRule(name, key);
  const Expr ref = b_.Ref(rule);
  shared_.emplace(key, ref);  // before building: the generic value is recursive
  b_.Define(rule, (this->*build)());
  return ref;
}

Expr JsonPieces::Ws() {
  if (!options_.allow_whitespace) return b_.Empty();
  return Shared("ws", &JsonPieces::BuildWs);
}
Expr JsonPieces::BuildWs() {
  CodePointSet indent;
  indent.Add(' ', ' ');
  indent.Add('\t', '\t');
  return b_.Optional(
      b_.Alt({b_.Literal(" "),
              b_.Seq({b_.Literal("\n"), b_.Repeat(b_.Chars(indent), 0, options_.max_indent)})}));
}

Expr JsonPieces::AnyChar() { return Shared("char", &JsonPieces::BuildAnyChar); }
Expr JsonPieces::BuildAnyChar() {
  const Expr hex = HexDigit();
  // \uXXXX except the surrogates D800-DFFF (one escape, one code point).
  CodePointSet lead_plain;
  for (char c : std::string_view("0123456789abcefABCEF")) lead_plain.Add(c, c);
  CodePointSet lead_d;
  lead_d.Add('d', 'd');
  lead_d.Add('D', 'D');
  const Expr u =
      b_.Seq({b_.Literal("u"), b_.Alt({b_.Seq({b_.Chars(lead_plain), hex, hex, hex}),
                                       b_.Seq({b_.Chars(lead_d), Digit('0', '7'), hex, hex})})});
  CodePointSet simple;
  for (char c : std::string_view("\"\\/bfnrt")) simple.Add(c, c);
  return b_.Alt(
      {b_.Chars(RawStringChars()), b_.Seq({b_.Literal("\\"), b_.Alt({b_.Chars(simple), u})})});
}

Expr JsonPieces::KeyChar() { return Shared("key-char", &JsonPieces::BuildKeyChar); }
Expr JsonPieces::BuildKeyChar() { return Units(CodePointSet::All()); }

Expr JsonPieces::Units(const CodePointSet& set) {
  auto it = units_.find(set.ranges());
  if (it != units_.end()) return it->second;
  const Expr e = BuildUnits(set);
  units_.emplace(set.ranges(), e);
  return e;
}

Expr JsonPieces::BuildUnits(const CodePointSet& set) {
  if (set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second) {
    const uint32_t cp = set.ranges()[0].first;
    if (const char* esc = ShortEscape(cp)) return b_.Literal(esc);
    if (cp < 0x20) return b_.Literal(absl::StrFormat("\\u%04x", cp));
    std::string utf8;
    AppendUtf8(cp, utf8);
    return b_.Literal(utf8);
  }
  const Expr raw = b_.Chars(set.Intersect(RawStringChars()));
  if (EscapedChars().Minus(set).empty()) return b_.Alt({raw, AllEscapes()});
  return b_.Alt({raw, Escapes(set)});
}

const CodePointSet& JsonPieces::EscapedChars() {
  static const CodePointSet* set = [] {
    auto* s = new CodePointSet(CodePointSet::Range(0, 0x1F));
    s->Add('"', '"');
    s->Add('\\', '\\');
    return s;
  }();
  return *set;
}

Expr JsonPieces::AllEscapes() { return Shared("escape", &JsonPieces::BuildAllEscapes); }
Expr JsonPieces::BuildAllEscapes() { return Escapes(EscapedChars()); }

// The canonical escapes of the members of `set` that JSON requires escaped: the short ones,
// else \u000X / \u001X.
Expr JsonPieces::Escapes(const CodePointSet& set) {
  std::vector<Expr> alts;
  CodePointSet low[2];
  std::vector<uint32_t> escaped = {'"', '\\'};  // and the controls
  for (uint32_t cp = 0; cp < 0x20; ++cp) escaped.push_back(cp);
  for (uint32_t cp : escaped) {
    if (!set.Contains(cp)) continue;
    if (const char* esc = ShortEscape(cp)) {
      alts.push_back(b_.Literal(esc));
    } else {
      const uint32_t nibble = cp & 0xF;
      low[cp >> 4].Add(nibble < 10 ? '0' + nibble : 'a' + nibble - 10,
                       nibble < 10 ? '0' + nibble : 'a' + nibble - 10);
      if (nibble >= 10) low[cp >> 4].Add('A' + nibble - 10, 'A' + nibble - 10);
    }
  }
  for (int hi = 0; hi < 2; ++hi) {
    if (!low[hi].empty()) {
      alts.push_back(b_.Seq({b_.Literal(hi == 0 ? "\\u000" : "\\u001"), b_.Chars(low[hi])}));
    }
  }
  return b_.Alt(std::move(alts));
}

Expr JsonPieces::AnyString() { return Shared("string", &JsonPieces::BuildAnyString); }
Expr JsonPieces::BuildAnyString() {
  return b_.Seq({b_.Literal("\""), b_.Repeat(AnyChar(), 0, -1), b_.Literal("\"")});
}

Expr JsonPieces::Digit(char lo, char hi) { return b_.Chars(CodePointSet::Range(lo, hi)); }
Expr JsonPieces::HexDigit() {
  CodePointSet hex = CodePointSet::Range('0', '9');
  hex.Add('a', 'f');
  hex.Add('A', 'F');
  return b_.Chars(hex);
}

Expr JsonPieces::Integer() { return Shared("integer", &JsonPieces::BuildInteger); }
Expr JsonPieces::BuildInteger() {
  return b_.Alt(
      {b_.Literal("0"), b_.Seq({b_.Optional(b_.Literal("-")), Digit('1', '9'),
                                b_.Repeat(Digit(), 0, options_.max_integer_digits - 1)})});
}

Expr JsonPieces::Number() { return Shared("number", &JsonPieces::BuildNumber); }
Expr JsonPieces::BuildNumber() {
  const Expr int_part =
      b_.Alt({b_.Literal("0"),
              b_.Seq({Digit('1', '9'), b_.Repeat(Digit(), 0, options_.max_integer_digits - 1)})});
  const Expr frac = options_.max_fraction_digits > 0
                        ? b_.Optional(b_.Seq({b_.Literal("."),
                                              b_.Repeat(Digit(), 1, options_.max_fraction_digits)}))
                        : b_.Empty();
  CodePointSet e, sign;
  e.Add('e', 'e');
  e.Add('E', 'E');
  sign.Add('+', '+');
  sign.Add('-', '-');
  const Expr exp = options_.max_exponent_digits > 0
                       ? b_.Optional(b_.Seq({b_.Chars(e), b_.Optional(b_.Chars(sign)),
                                             b_.Repeat(Digit(), 1, options_.max_exponent_digits)}))
                       : b_.Empty();
  return b_.Seq({b_.Optional(b_.Literal("-")), int_part, frac, exp});
}

Expr JsonPieces::Boolean() { return b_.Alt({b_.Literal("true"), b_.Literal("false")}); }
Expr JsonPieces::Null() { return b_.Literal("null"); }

Expr JsonPieces::Value() { return Shared("value", &JsonPieces::BuildValue); }
Expr JsonPieces::BuildValue() {
  return b_.Alt({Object(), Array(), AnyString(), Number(), Boolean(), Null()});
}

Expr JsonPieces::Object() { return Shared("object", &JsonPieces::BuildObject); }
Expr JsonPieces::BuildObject() {
  const Expr ws = Ws();
  const Expr member = b_.Seq({AnyString(), ws, b_.Literal(":"), ws, Value(), ws});
  return b_.Seq(
      {b_.Literal("{"), ws,
       b_.Optional(b_.Seq({member, b_.Repeat(b_.Seq({b_.Literal(","), ws, member}), 0, -1)})),
       b_.Literal("}")});
}

Expr JsonPieces::Array() { return Shared("array", &JsonPieces::BuildArray); }
Expr JsonPieces::BuildArray() {
  const Expr ws = Ws();
  const Expr item = b_.Seq({Value(), ws});
  return b_.Seq({b_.Literal("["), ws,
                 b_.Optional(b_.Seq({item, b_.Repeat(b_.Seq({b_.Literal(","), ws, item}), 0, -1)})),
                 b_.Literal("]")});
}

Expr JsonPieces::RegexNodeExpr(const RegexNode& node, bool json) {
  switch (node.kind) {
    case RegexNode::Kind::kEmpty:
      return b_.Empty();
    case RegexNode::Kind::kChars: {
      if (json) return Units(node.chars);
      const auto& r = node.chars.ranges();
      if (r.size() == 1 && r[0].first == r[0].second) {
        std::string utf8;
        AppendUtf8(r[0].first, utf8);
        return b_.Literal(utf8);
      }
      return b_.Chars(node.chars);
    }
    case RegexNode::Kind::kSeq:
    case RegexNode::Kind::kAlt: {
      std::vector<Expr> kids;
      kids.reserve(node.kids.size());
      for (const RegexNode& k : node.kids) kids.push_back(RegexNodeExpr(k, json));
      return node.kind == RegexNode::Kind::kSeq ? b_.Seq(std::move(kids)) : b_.Alt(std::move(kids));
    }
    case RegexNode::Kind::kRepeat:
      return b_.Repeat(RegexNodeExpr(node.kids[0], json), node.min, node.max);
  }
  return b_.Never();
}

Expr JsonPieces::PatternContent(const ParsedRegex& regex) {
  std::vector<Expr> alts;
  for (const RegexBranch& branch : regex.branches) {
    const Expr any = b_.Repeat(AnyChar(), 0, -1);
    alts.push_back(
        b_.Seq({branch.anchored_start ? b_.Empty() : any, RegexNodeExpr(branch.node, true),
                branch.anchored_end ? b_.Empty() : any}));
  }
  return b_.Alt(std::move(alts));
}

Expr JsonPieces::RegexPlain(const ParsedRegex& regex) {
  std::vector<Expr> alts;
  for (const RegexBranch& branch : regex.branches) {
    alts.push_back(RegexNodeExpr(branch.node, false));
  }
  return b_.Alt(std::move(alts));
}

}  // namespace textgen::json_schema_internal
