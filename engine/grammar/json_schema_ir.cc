#include "engine/grammar/json_schema_ir.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/util/status_macros.h"

namespace textgen::json_schema_internal {
namespace {

constexpr int64_t kSaturate = INT64_MAX / 8;

int64_t SatAdd(int64_t a, int64_t b) { return std::min(kSaturate, a + b); }
int64_t SatMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSaturate / b ? kSaturate : a * b;
}

int Utf8Length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// A rule-name fragment: letters, digits and single dashes (GBNF names are [A-Za-z0-9-]+).
std::string SanitizeHint(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 40) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "r" : out;
}

void AppendEscapedCodePoint(uint32_t cp, std::string& out) {
  if (cp < 0x100) {
    absl::StrAppendFormat(&out, "\\x%02X", cp);
  } else if (cp < 0x10000) {
    absl::StrAppendFormat(&out, "\\u%04X", cp);
  } else {
    absl::StrAppendFormat(&out, "\\U%08X", cp);
  }
}

void AppendClassMember(uint32_t cp, std::string& out) {
  const bool plain = cp >= 0x20 && cp < 0x7F && cp != '\\' && cp != ']' && cp != '[' && cp != '-' &&
                     cp != '^' && cp != '"';
  if (plain) {
    out += static_cast<char>(cp);
  } else {
    AppendEscapedCodePoint(cp, out);
  }
}

}  // namespace

bool IsGbnfName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string GbnfQuote(std::string_view utf8) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < utf8.size()) {
    uint32_t cp;
    if (!DecodeUtf8(utf8, pos, cp)) {  // callers pass valid UTF-8; never emit a broken literal
      cp = 0xFFFD;
      ++pos;
    }
    if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
    } else {
      AppendEscapedCodePoint(cp, out);
    }
  }
  out += '"';
  return out;
}

std::string GbnfCharClass(const CodePointSet& set) {
  std::string out = "[";
  for (const auto& [lo, hi] : set.ranges()) {
    AppendClassMember(lo, out);
    if (hi > lo) {
      if (hi > lo + 1) out += '-';
      AppendClassMember(hi, out);
    }
  }
  out += ']';
  return out;
}

GbnfBuilder::GbnfBuilder(std::string root_name, BuildLimits limits)
    : root_name_(std::move(root_name)), limits_(limits) {
  nodes_.push_back(MakeNode(Kind::kNever));
  nodes_.push_back(MakeNode(Kind::kEmpty));
  rules_.push_back(Rule{root_name_, "the root", -1});
  names_.insert(root_name_);
}

void GbnfBuilder::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

const absl::Status& GbnfBuilder::CheckDeadline() {
  if (status_.ok() && absl::Now() > limits_.deadline) {
    Fail(absl::InvalidArgumentError(
        "schema too complex: converting it took longer than the time limit"));
  }
  return status_;
}

GbnfBuilder::Expr GbnfBuilder::Add(Node node) {
  if (!status_.ok()) return kNeverExpr;
  const int64_t max_nodes =
      limits_.max_size > (INT64_MAX - 4096) / 4 ? INT64_MAX : 4 * limits_.max_size + 4096;
  if (static_cast<int64_t>(nodes_.size()) > max_nodes) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat("schema too complex: the grammar exceeds ", limits_.max_size, " elements")));
    return kNeverExpr;
  }
  if (nodes_.size() % 1024 == 0 && !CheckDeadline().ok()) return kNeverExpr;
  nodes_.push_back(std::move(node));
  return static_cast<Expr>(nodes_.size() - 1);
}

int GbnfBuilder::Depth(const std::vector<Expr>& kids) const {
  int depth = 0;
  for (Expr e : kids) depth = std::max(depth, nodes_[e].depth + 1);
  return depth;
}

void GbnfBuilder::Hoist(std::vector<Expr>& kids) {
  if (Depth(kids) <= kMaxDepth) return;
  for (Expr& e : kids) {
    if (nodes_[e].depth + 1 <= kMaxDepth / 2) continue;
    const int rule = NewRule("part", "a deeply nested part of the grammar");
    Define(rule, e);
    e = Ref(rule);
  }
}

GbnfBuilder::Expr GbnfBuilder::Literal(std::string_view utf8) {
  if (utf8.empty()) return kEmptyExpr;
  if (!status_.ok()) return kNeverExpr;
  auto it = literals_.find(std::string(utf8));
  if (it != literals_.end()) return it->second;
  Node node = MakeNode(Kind::kLiteral);
  node.literal = std::string(utf8);
  node.weight = static_cast<int64_t>(utf8.size());
  const Expr e = Add(std::move(node));
  if (e != kNeverExpr) literals_.emplace(std::string(utf8), e);
  return e;
}

GbnfBuilder::Expr GbnfBuilder::Chars(const CodePointSet& set) {
  if (set.empty() || !status_.ok()) return kNeverExpr;
  auto it = char_sets_.find(set.ranges());
  if (it != char_sets_.end()) return it->second;
  Node node = MakeNode(Kind::kChars);
  node.chars = set;
  node.weight = static_cast<int64_t>(set.ranges().size()) + 4;
  const Expr e = Add(std::move(node));
  if (e != kNeverExpr) char_sets_.emplace(set.ranges(), e);
  return e;
}

GbnfBuilder::Expr GbnfBuilder::Seq(std::vector<Expr> items) {
  if (!status_.ok()) return kNeverExpr;
  std::vector<Expr> flat;
  std::string pending;  // adjacent literals merge
  bool has_pending = false;
  const auto flush = [&] {
    if (has_pending) flat.push_back(Literal(pending));
    pending.clear();
    has_pending = false;
  };
  std::vector<Expr> expanded;
  for (Expr e : items) {
    if (nodes_[e].kind == Kind::kSeq) {
      expanded.insert(expanded.end(), nodes_[e].kids.begin(), nodes_[e].kids.end());
    } else {
      expanded.push_back(e);
    }
  }
  for (Expr e : expanded) {
    const Node& n = nodes_[e];
    if (n.kind == Kind::kNever) return kNeverExpr;
    if (n.kind == Kind::kEmpty) continue;
    if (n.kind == Kind::kLiteral) {
      pending += n.literal;
      has_pending = true;
      continue;
    }
    flush();
    flat.push_back(e);
  }
  flush();
  if (flat.empty()) return kEmptyExpr;
  if (flat.size() == 1) return flat[0];
  Hoist(flat);
  Node node = MakeNode(Kind::kSeq);
  node.depth = Depth(flat);
  node.weight = 0;
  for (Expr e : flat) node.weight = SatAdd(node.weight, nodes_[e].weight);
  node.kids = std::move(flat);
  return Add(std::move(node));
}

GbnfBuilder::Expr GbnfBuilder::Alt(std::vector<Expr> items) {
  if (!status_.ok()) return kNeverExpr;
  std::vector<Expr> flat;
  const auto push = [&](Expr e) {
    if (nodes_[e].kind == Kind::kNever) return;
    if (std::find(flat.begin(), flat.end(), e) == flat.end()) flat.push_back(e);
  };
  for (Expr e : items) {
    if (nodes_[e].kind == Kind::kAlt) {
      for (Expr k : nodes_[e].kids) push(k);
    } else {
      push(e);
    }
  }
  if (flat.empty()) return kNeverExpr;
  if (flat.size() == 1) return flat[0];
  Hoist(flat);
  Node node = MakeNode(Kind::kAlt);
  node.depth = Depth(flat);
  for (Expr e : flat) node.weight = SatAdd(node.weight, nodes_[e].weight);
  node.kids = std::move(flat);
  return Add(std::move(node));
}

GbnfBuilder::Expr GbnfBuilder::Repeat(Expr e, int64_t min, int64_t max) {
  if (!status_.ok()) return kNeverExpr;
  if (max > kUnboundedAbove) max = -1;
  if (max >= 0 && min > max) return kNeverExpr;
  if (min > kMaxMinimumRepetition) {
    Fail(absl::InvalidArgumentError(absl::StrCat("schema too complex: a repetition of at least ",
                                                 min, " (at most ", kMaxMinimumRepetition, ")")));
    return kNeverExpr;
  }
  if (e == kNeverExpr) return min == 0 ? kEmptyExpr : kNeverExpr;
  if (e == kEmptyExpr || max == 0) return kEmptyExpr;
  if (min == 1 && max == 1) return e;
  const int64_t k = kMaxPrintedRepetition;
  if (min > k) {  // (e{k}){q} then the rest: every count passes through the same path
    const int64_t q = min / k;
    return Seq({Repeat(Repeat(e, k, k), q, q), Repeat(e, min - q * k, max < 0 ? -1 : max - q * k)});
  }
  if (max > k) {  // e{min,k-1}, or e{k} and then up to max-k more
    return Alt({Repeat(e, min, k - 1), Seq({Repeat(e, k, k), Repeat(e, 0, max - k)})});
  }
  std::vector<Expr> kids = {e};
  Hoist(kids);
  Node node = MakeNode(Kind::kRepeat);
  node.depth = Depth(kids);
  node.kids = kids;
  node.min = min;
  node.max = max;
  node.weight = SatAdd(nodes_[kids[0]].weight, 1);
  return Add(std::move(node));
}

int GbnfBuilder::NewRule(std::string_view hint, std::string origin) {
  if (status_.ok() && static_cast<int64_t>(rules_.size()) >= limits_.max_rules) {
    Fail(absl::InvalidArgumentError(absl::StrCat("schema too complex: the grammar needs more than ",
                                                 limits_.max_rules, " rules")));
  }
  const std::string base = root_name_ + "-" + SanitizeHint(hint);
  std::string name = base;
  for (int i = 2; names_.contains(name); ++i) name = absl::StrCat(base, "-", i);
  names_.insert(name);
  rules_.push_back(Rule{std::move(name), std::move(origin), -1});
  return static_cast<int>(rules_.size() - 1);
}

void GbnfBuilder::Define(int rule, Expr body) {
  if (!status_.ok()) return;
  rules_[rule].body = body;
  total_size_ = SatAdd(total_size_, nodes_[body].weight);
  if (total_size_ > limits_.max_size) {
    Fail(absl::InvalidArgumentError(absl::StrCat("schema too complex: the grammar exceeds ",
                                                 limits_.max_size,
                                                 " elements (repetition counts multiply)")));
  }
  CheckDeadline();
}

GbnfBuilder::Expr GbnfBuilder::Ref(int rule) {
  Node node = MakeNode(Kind::kRef);
  node.rule = rule;
  return Add(std::move(node));
}

// The shortest text (in bytes) of `e` given the rules' shortest texts; kInf: none.
int64_t GbnfBuilder::MinBytes(Expr e, const std::vector<int64_t>& rule_min) const {
  const Node& n = nodes_[e];
  switch (n.kind) {
    case Kind::kNever:
      return kInf;
    case Kind::kEmpty:
      return 0;
    case Kind::kLiteral:
      return static_cast<int64_t>(n.literal.size());
    case Kind::kChars:
      return Utf8Length(n.chars.ranges().front().first);
    case Kind::kRef:
      return rule_min[n.rule];
    case Kind::kRepeat:
      if (n.min == 0) return 0;
      return node_min_[n.kids[0]] >= kInf ? kInf : SatMul(node_min_[n.kids[0]], n.min);
    case Kind::kSeq: {
      int64_t sum = 0;
      for (Expr k : n.kids) {
        if (node_min_[k] >= kInf) return kInf;
        sum = SatAdd(sum, node_min_[k]);
      }
      return sum;
    }
    case Kind::kAlt: {
      int64_t best = kInf;
      for (Expr k : n.kids) best = std::min(best, node_min_[k]);
      return best;
    }
  }
  return kInf;
}

// Computes node_min_ and the rules' shortest texts: passes in node order (an expression's parts
// precede it) until nothing changes; recursion through a rule created before its use takes
// one more pass per level.
absl::Status GbnfBuilder::ComputeMinBytes(std::vector<int64_t>& rule_min) {
  std::vector<std::vector<int>> rules_of_body(nodes_.size());
  for (int r = 0; r < static_cast<int>(rules_.size()); ++r) {
    if (rules_[r].body >= 0) rules_of_body[rules_[r].body].push_back(r);
  }
  rule_min.assign(rules_.size(), kInf);
  node_min_.assign(nodes_.size(), kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t e = 0; e < nodes_.size(); ++e) {
      const int64_t m = MinBytes(static_cast<Expr>(e), rule_min);
      if (m < node_min_[e]) node_min_[e] = m;
      for (int r : rules_of_body[e]) {
        if (node_min_[e] < rule_min[r]) {
          rule_min[r] = node_min_[e];
          changed = true;
        }
      }
    }
    TG_RETURN_IF_ERROR(CheckDeadline());
  }
  return absl::OkStatus();
}

// The rules referenced by live parts of `e` (alternatives that can match something); with
// `left_only`, only those that can start the text (preceded by parts that can match "").
void GbnfBuilder::LiveRefs(Expr e, bool left_only, std::vector<int>& out) const {
  const Node& n = nodes_[e];
  if (node_min_[e] >= kInf) return;
  switch (n.kind) {
    case Kind::kRef:
      out.push_back(n.rule);
      return;
    case Kind::kRepeat:
      LiveRefs(n.kids[0], left_only, out);
      return;
    case Kind::kAlt:
      for (Expr k : n.kids) LiveRefs(k, left_only, out);
      return;
    case Kind::kSeq:
      for (Expr k : n.kids) {
        LiveRefs(k, left_only, out);
        if (left_only && node_min_[k] > 0) return;
      }
      return;
    default:
      return;
  }
}

int64_t GbnfBuilder::MaxBytes(Expr e, const std::vector<int64_t>& rule_max) const {
  const Node& n = nodes_[e];
  switch (n.kind) {
    case Kind::kNever:
    case Kind::kEmpty:
      return 0;
    case Kind::kLiteral:
      return static_cast<int64_t>(n.literal.size());
    case Kind::kChars:
      return Utf8Length(n.chars.max());
    case Kind::kRef:
      return rule_max[n.rule];
    case Kind::kRepeat: {
      if (node_min_[n.kids[0]] >= kInf) return 0;
      const int64_t one = MaxBytes(n.kids[0], rule_max);
      if (one >= kInf) return kInf;
      if (n.max < 0) return one == 0 ? 0 : kInf;
      return SatMul(one, n.max);
    }
    case Kind::kSeq: {
      int64_t sum = 0;
      for (Expr k : n.kids) {
        const int64_t m = MaxBytes(k, rule_max);
        if (m >= kInf) return kInf;
        sum = SatAdd(sum, m);
      }
      return sum;
    }
    case Kind::kAlt: {
      int64_t best = 0;
      for (Expr k : n.kids) {
        if (node_min_[k] < kInf) best = std::max(best, MaxBytes(k, rule_max));
      }
      return best;
    }
  }
  return kInf;
}

void GbnfBuilder::Print(Expr e, int prec, std::string& out) const {
  const Node& n = nodes_[e];
  switch (n.kind) {
    case Kind::kNever:
      out += "[]";  // unreachable: dead parts are pruned before printing
      return;
    case Kind::kEmpty:
      out += "\"\"";
      return;
    case Kind::kLiteral: {
      // Long literals print as several, split between UTF-8 characters.
      std::vector<std::string_view> pieces;
      std::string_view rest = n.literal;
      while (rest.size() > kMaxPrintedLiteral) {
        size_t cut = kMaxPrintedLiteral;
        while (cut > 0 && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;
        pieces.push_back(rest.substr(0, cut));
        rest.remove_prefix(cut);
      }
      pieces.push_back(rest);
      size_t code_points = 0;
      for (unsigned char c : n.literal) code_points += (c & 0xC0) != 0x80;
      const bool group = (prec >= 2 && code_points > 1) || (prec >= 1 && pieces.size() > 1);
      if (group) out += "(";
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0) out += ' ';
        out += GbnfQuote(pieces[i]);
      }
      if (group) out += ")";
      return;
    }
    case Kind::kChars:
      out += GbnfCharClass(n.chars);
      return;
    case Kind::kRef:
      out += rules_[n.rule].name;
      return;
    case Kind::kSeq: {
      if (prec >= 2) out += "(";
      for (size_t i = 0; i < n.kids.size(); ++i) {
        if (i > 0) out += ' ';
        Print(n.kids[i], 1, out);
      }
      if (prec >= 2) out += ")";
      return;
    }
    case Kind::kAlt: {
      std::vector<Expr> live;
      for (Expr k : n.kids) {
        if (node_min_[k] < kInf) live.push_back(k);
      }
      if (live.size() == 1) return Print(live[0], prec, out);
      if (prec >= 1) out += "(";
      for (size_t i = 0; i < live.size(); ++i) {
        if (i > 0) out += " | ";
        Print(live[i], 1, out);
      }
      if (prec >= 1) out += ")";
      return;
    }
    case Kind::kRepeat: {
      if (node_min_[n.kids[0]] >= kInf) {
        out += "\"\"";
        return;
      }
      if (prec >= 2) out += "(";
      Print(n.kids[0], 2, out);
      if (n.min == 0 && n.max == 1) {
        out += '?';
      } else if (n.min == 0 && n.max < 0) {
        out += '*';
      } else if (n.min == 1 && n.max < 0) {
        out += '+';
      } else if (n.max < 0) {
        absl::StrAppend(&out, "{", n.min, ",}");
      } else if (n.min == n.max) {
        absl::StrAppend(&out, "{", n.min, "}");
      } else {
        absl::StrAppend(&out, "{", n.min, ",", n.max, "}");
      }
      if (prec >= 2) out += ")";
      return;
    }
  }
}

absl::StatusOr<GbnfGrammar> GbnfBuilder::Finish(const std::string& empty_message) {
  TG_RETURN_IF_ERROR(status_);
  for (const Rule& rule : rules_) {
    if (rule.body < 0) return absl::InternalError("grammar rule " + rule.name + " never defined");
  }
  std::vector<int64_t> rule_min;
  TG_RETURN_IF_ERROR(ComputeMinBytes(rule_min));
  if (rule_min[kRoot] >= kInf) return absl::InvalidArgumentError(empty_message);
  // The live rules reachable from the root, their live references and left references.
  const int n_rules = static_cast<int>(rules_.size());
  std::vector<char> reached(n_rules, 0);
  std::vector<std::vector<int>> refs(n_rules), left_refs(n_rules);
  std::vector<int> stack = {kRoot};
  reached[kRoot] = 1;
  while (!stack.empty()) {
    const int r = stack.back();
    stack.pop_back();
    LiveRefs(rules_[r].body, false, refs[r]);
    LiveRefs(rules_[r].body, true, left_refs[r]);
    for (int s : refs[r]) {
      if (!reached[s]) reached[s] = 1, stack.push_back(s);
    }
  }
  // Kahn's algorithm over "needs": a rule is finished once every rule it needs is. Rules left
  // over lie on (or reach) a cycle.
  const auto topo = [&](const std::vector<std::vector<int>>& needs, auto&& visit) {
    std::vector<int> pending(n_rules, 0);
    std::vector<std::vector<int>> needed_by(n_rules);
    for (int r = 0; r < n_rules; ++r) {
      if (!reached[r]) continue;
      std::vector<int> uniq = needs[r];
      std::sort(uniq.begin(), uniq.end());
      uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
      pending[r] = static_cast<int>(uniq.size());
      for (int s : uniq) needed_by[s].push_back(r);
    }
    std::vector<int> ready, done(n_rules, 0);
    for (int r = 0; r < n_rules; ++r) {
      if (reached[r] && pending[r] == 0) ready.push_back(r);
    }
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      done[r] = 1;
      visit(r);
      for (int d : needed_by[r]) {
        if (--pending[d] == 0) ready.push_back(d);
      }
    }
    return done;
  };
  const std::vector<int> left_done = topo(left_refs, [](int) {});
  for (int r = 0; r < n_rules; ++r) {
    if (!reached[r] || left_done[r]) continue;
    // Walk unfinished left references until a rule repeats: it is on a cycle.
    std::vector<char> seen(n_rules, 0);
    int at = r;
    while (!seen[at]) {
      seen[at] = 1;
      for (int s : left_refs[at]) {
        if (!left_done[s]) {
          at = s;
          break;
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema is left-recursive at ", rules_[at].origin,
        ": it can contain itself without any text before it (a $ref cycle through anyOf, "
        "oneOf or allOf)"));
  }
  std::vector<int64_t> rule_max(n_rules, kInf);
  topo(refs, [&](int r) { rule_max[r] = MaxBytes(rules_[r].body, rule_max); });

  GbnfGrammar out;
  for (int r = 0; r < n_rules; ++r) {
    if (!reached[r]) continue;
    absl::StrAppend(&out.text, rules_[r].name, " ::= ");
    Print(rules_[r].body, 0, out.text);
    out.text += '\n';
    ++out.rules;
  }
  if (rule_max[kRoot] < kSaturate) out.max_bytes = rule_max[kRoot];
  return out;
}

}  // namespace textgen::json_schema_internal
