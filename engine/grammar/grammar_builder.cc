#include "engine/grammar/grammar_builder.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/grammar/utf8_ranges.h"
#include "engine/util/status_macros.h"

namespace textgen {

using Edge = Grammar::Edge;
using EdgeKind = Grammar::EdgeKind;

absl::StatusOr<int32_t> GrammarBuilder::NewNode(int32_t rule) {
  if (static_cast<int64_t>(g_->nodes_.size()) >= limits_.max_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "grammar too complex: more than %d automaton nodes (literals, classes and rules expand "
        "to nodes)",
        limits_.max_nodes));
  }
  g_->nodes_.emplace_back();
  g_->nodes_.back().rule = rule;
  out_edges_.emplace_back();
  return static_cast<int32_t>(g_->nodes_.size() - 1);
}

void GrammarBuilder::AddEdge(int32_t from, Edge e) { out_edges_[from].push_back(e); }

absl::StatusOr<int32_t> GrammarBuilder::NewRule(std::string name) {
  if (static_cast<int64_t>(g_->rules_.size()) >= limits_.max_rules) {
    return absl::InvalidArgumentError(
        absl::StrFormat("grammar too complex: more than %d rules (repetitions {m,n} create rules)",
                        limits_.max_rules));
  }
  g_->rules_.emplace_back();
  g_->rules_.back().name = std::move(name);
  pending_bodies_.push_back(nullptr);
  generated_count_.push_back(0);
  return static_cast<int32_t>(g_->rules_.size() - 1);
}

absl::StatusOr<int32_t> GrammarBuilder::Compile(const Expr& expr, int32_t in, int32_t rule) {
  switch (expr.kind) {
    case Expr::Kind::kSeq: {
      int32_t cur = in;
      for (const Expr& child : expr.children) {
        TG_ASSIGN_OR_RETURN(cur, Compile(child, cur, rule));
      }
      return cur;
    }
    case Expr::Kind::kAlt: {
      if (expr.children.size() == 1) return Compile(expr.children[0], in, rule);
      TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
      for (const Expr& child : expr.children) {
        // A fresh entry per alternative: a loop inside one must not re-enter the others.
        TG_ASSIGN_OR_RETURN(int32_t entry, NewNode(rule));
        AddEdge(in, Edge{EdgeKind::kEpsilon, 0, 0, entry});
        TG_ASSIGN_OR_RETURN(int32_t end, Compile(child, entry, rule));
        AddEdge(end, Edge{EdgeKind::kEpsilon, 0, 0, out});
      }
      return out;
    }
    case Expr::Kind::kLiteral: {
      int32_t cur = in;
      for (char c : expr.bytes) {
        TG_ASSIGN_OR_RETURN(int32_t next, NewNode(rule));
        uint8_t b = static_cast<uint8_t>(c);
        AddEdge(cur, Edge{EdgeKind::kByte, b, b, next});
        cur = next;
      }
      return cur;
    }
    case Expr::Kind::kClass:
      return CompileClass(expr, in, rule);
    case Expr::Kind::kRuleRef: {
      TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
      AddEdge(in, Edge{EdgeKind::kCall, 0, 0, out, expr.rule});
      return out;
    }
    case Expr::Kind::kToken: {
      TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
      AddEdge(in, Edge{expr.negated ? EdgeKind::kNotToken : EdgeKind::kToken, 0, 0, out,
                       expr.token_ref});
      g_->has_token_edges_ = true;
      return out;
    }
    case Expr::Kind::kRepeat:
      return CompileRepeat(expr, in, rule);
  }
  return absl::InternalError("unknown expression kind");
}

absl::StatusOr<int32_t> GrammarBuilder::CompileClass(const Expr& expr, int32_t in, int32_t rule) {
  auto ranges = gbnf::NormalizeCodePoints(expr.ranges, expr.negated);
  auto seqs = gbnf::Utf8Sequences(ranges);
  // A fresh entry so that sequences sharing a first byte range share its node (a small trie).
  TG_ASSIGN_OR_RETURN(int32_t entry, NewNode(rule));
  AddEdge(in, Edge{EdgeKind::kEpsilon, 0, 0, entry});
  TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
  if (seqs.empty()) return out;  // matches nothing (e.g. [^\x00-\U0010FFFF]): `out` is dead
  for (const auto& seq : seqs) {
    int32_t cur = entry;
    for (size_t i = 0; i < seq.size(); ++i) {
      bool last = i + 1 == seq.size();
      int32_t next = -1;
      if (!last) {
        for (const Edge& e : out_edges_[cur]) {
          if (e.kind == EdgeKind::kByte && e.lo == seq[i].lo && e.hi == seq[i].hi &&
              e.target != out) {
            next = e.target;
            break;
          }
        }
        if (next < 0) {
          TG_ASSIGN_OR_RETURN(next, NewNode(rule));
          AddEdge(cur, Edge{EdgeKind::kByte, seq[i].lo, seq[i].hi, next});
        }
      } else {
        next = out;
        AddEdge(cur, Edge{EdgeKind::kByte, seq[i].lo, seq[i].hi, next});
      }
      cur = next;
    }
  }
  return out;
}

absl::StatusOr<int32_t> GrammarBuilder::CompileRepeat(const Expr& expr, int32_t in, int32_t rule) {
  const Expr& body = expr.children[0];
  uint32_t min = expr.min, max = expr.max;
  if (max == 0) return in;
  if (min == 1 && max == 1) return Compile(body, in, rule);
  if (min == 0 && max == 1) {  // x?
    TG_ASSIGN_OR_RETURN(int32_t entry, NewNode(rule));
    AddEdge(in, Edge{EdgeKind::kEpsilon, 0, 0, entry});
    TG_ASSIGN_OR_RETURN(int32_t end, Compile(body, entry, rule));
    TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
    AddEdge(entry, Edge{EdgeKind::kEpsilon, 0, 0, out});
    AddEdge(end, Edge{EdgeKind::kEpsilon, 0, 0, out});
    return out;
  }
  if (min <= 1 && max == Expr::kUnbounded) {  // x* and x+: a loop
    TG_ASSIGN_OR_RETURN(int32_t loop, NewNode(rule));
    AddEdge(in, Edge{EdgeKind::kEpsilon, 0, 0, loop});
    TG_ASSIGN_OR_RETURN(int32_t entry, NewNode(rule));
    AddEdge(loop, Edge{EdgeKind::kEpsilon, 0, 0, entry});
    TG_ASSIGN_OR_RETURN(int32_t end, Compile(body, entry, rule));
    TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
    AddEdge(end, Edge{EdgeKind::kEpsilon, 0, 0, loop});
    if (min == 0) {
      AddEdge(loop, Edge{EdgeKind::kEpsilon, 0, 0, out});
    } else {
      AddEdge(end, Edge{EdgeKind::kEpsilon, 0, 0, out});
    }
    return out;
  }
  // x{m,n}: one repeat node counting calls of x's rule.
  int32_t body_rule;
  if (body.kind == Expr::Kind::kRuleRef) {
    body_rule = body.rule;
  } else {
    std::string name =
        absl::StrCat(g_->rules_[rule].name, "_", ++generated_count_[static_cast<size_t>(rule)]);
    TG_ASSIGN_OR_RETURN(body_rule, NewRule(std::move(name)));
    pending_bodies_[body_rule] = &body;
  }
  TG_ASSIGN_OR_RETURN(int32_t rep, NewNode(rule));
  AddEdge(in, Edge{EdgeKind::kEpsilon, 0, 0, rep});
  TG_ASSIGN_OR_RETURN(int32_t out, NewNode(rule));
  Grammar::Node& n = g_->nodes_[rep];
  n.rep_rule = body_rule;
  n.rep_min = static_cast<uint16_t>(min);
  n.rep_max = max == Expr::kUnbounded ? Frame::kInf : static_cast<uint16_t>(max);
  n.rep_next = out;
  return out;
}

void GrammarBuilder::Finish() {
  auto& nodes = g_->nodes_;
  const int32_t n = static_cast<int32_t>(nodes.size());
  // Nodes that only pass through (one epsilon edge, nothing else) are skipped by their users.
  auto pure = [&](int32_t v) {
    return out_edges_[v].size() == 1 && out_edges_[v][0].kind == EdgeKind::kEpsilon &&
           !nodes[v].final && nodes[v].rep_rule < 0;
  };
  std::vector<int32_t> resolved(n, -1);
  auto resolve = [&](int32_t v) {
    int32_t cur = v;
    for (int steps = 0; pure(cur) && steps < n; ++steps) {
      if (resolved[cur] >= 0) {
        cur = resolved[cur];
        break;
      }
      cur = out_edges_[cur][0].target;
    }
    resolved[v] = cur;
    return cur;
  };
  // A call's return node is never a repeat node: a frame below the top at a repeat node always
  // means "this repetition called its body" (stack_ops.cc relies on it to skip empty iterations).
  auto resolve_call = [&](int32_t v) {
    int32_t cur = v;
    for (int steps = 0; steps < 64 && pure(cur); ++steps) {
      int32_t next = out_edges_[cur][0].target;
      if (nodes[next].rep_rule >= 0) break;
      cur = next;
    }
    return cur;
  };
  for (int32_t v = 0; v < n; ++v) {
    for (Edge& e : out_edges_[v]) {
      e.target = e.kind == EdgeKind::kCall ? resolve_call(e.target) : resolve(e.target);
    }
    if (nodes[v].rep_rule >= 0) nodes[v].rep_next = resolve(nodes[v].rep_next);
  }
  for (Grammar::Rule& r : g_->rules_) r.start = resolve(r.start);
  g_->edges_.clear();
  for (int32_t v = 0; v < n; ++v) {
    Grammar::Node& node = nodes[v];
    node.edge_begin = static_cast<uint32_t>(g_->edges_.size());
    for (const Edge& e : out_edges_[v]) {
      g_->edges_.push_back(e);
      if (e.kind == EdgeKind::kByte || e.kind == EdgeKind::kToken ||
          e.kind == EdgeKind::kNotToken) {
        node.consuming = true;
      }
    }
    node.edge_end = static_cast<uint32_t>(g_->edges_.size());
    node.tail = node.final && node.edge_begin == node.edge_end && node.rep_rule < 0;
  }
  out_edges_.clear();
  out_edges_.shrink_to_fit();
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarBuilder::Build(std::string_view root) {
  const size_t named = parsed_.names.size();
  for (size_t i = 0; i < named; ++i) {
    if (!parsed_.defined[i]) {
      auto [line, col] = parsed_.LineColumn(parsed_.first_use[i]);
      return absl::InvalidArgumentError(
          absl::StrCat(line, ":", col, ": undefined rule '", parsed_.names[i], "'"));
    }
  }
  int32_t root_id = -1;
  for (size_t i = 0; i < named; ++i) {
    if (parsed_.names[i] == root) root_id = static_cast<int32_t>(i);
  }
  if (root_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("1:1: the grammar has no rule named '", std::string(root), "' (its root)"));
  }
  for (size_t i = 0; i < named; ++i) {
    TG_ASSIGN_OR_RETURN(int32_t id, NewRule(parsed_.names[i]));
    pending_bodies_[id] = &parsed_.bodies[i];
  }
  g_->root_ = root_id;
  g_->token_refs_ = parsed_.token_refs;
  // Rules created for repetition bodies are appended while compiling, and compiled in turn.
  for (size_t r = 0; r < g_->rules_.size(); ++r) {
    int32_t rule = static_cast<int32_t>(r);
    TG_ASSIGN_OR_RETURN(int32_t start, NewNode(rule));
    g_->rules_[r].start = start;
    TG_ASSIGN_OR_RETURN(int32_t end, Compile(*pending_bodies_[r], start, rule));
    g_->nodes_[end].final = true;
  }
  Finish();
  ComputeNullable();
  TG_RETURN_IF_ERROR(CheckLeftRecursion());
  ComputeFollow();
  ComputeStaticReturns();
  return std::shared_ptr<const Grammar>(std::move(g_));
}

std::string Grammar::DebugString() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    absl::StrAppendFormat(&out, "rule %d %s start=%d%s%s\n", r, rules_[r].name, rules_[r].start,
                          rules_[r].nullable ? " nullable" : "",
                          static_cast<int32_t>(r) == root_ ? " root" : "");
  }
  for (size_t v = 0; v < nodes_.size(); ++v) {
    const Node& n = nodes_[v];
    absl::StrAppendFormat(&out, "%d r%d%s%s:", v, n.rule, n.final ? " final" : "",
                          n.rep_rule >= 0 ? absl::StrFormat(" rep(r%d,%d,%d)->%d", n.rep_rule,
                                                            n.rep_min, n.rep_max, n.rep_next)
                                          : "");
    for (uint32_t i = n.edge_begin; i < n.edge_end; ++i) {
      const Edge& e = edges_[i];
      switch (e.kind) {
        case EdgeKind::kByte:
          absl::StrAppendFormat(&out, " [%02X-%02X]->%d", e.lo, e.hi, e.target);
          break;
        case EdgeKind::kEpsilon:
          absl::StrAppendFormat(&out, " eps->%d", e.target);
          break;
        case EdgeKind::kCall:
          absl::StrAppendFormat(&out, " call(r%d)->%d", e.arg, e.target);
          break;
        case EdgeKind::kToken:
          absl::StrAppendFormat(&out, " tok(%d)->%d", e.arg, e.target);
          break;
        case EdgeKind::kNotToken:
          absl::StrAppendFormat(&out, " !tok(%d)->%d", e.arg, e.target);
          break;
      }
    }
    out += "\n";
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view gbnf,
                                                         std::string_view root,
                                                         const GrammarLimits& limits) {
  TG_ASSIGN_OR_RETURN(gbnf::ParsedGrammar parsed, gbnf::Parse(gbnf, limits));
  return GrammarBuilder(std::move(parsed), limits).Build(root);
}

}  // namespace textgen
