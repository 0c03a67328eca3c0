// GrammarBuilder's analyses of the finished automaton. Each runs in time linear in the grammar
// (or a small multiple: FOLLOW sets grow at most 256 times per rule), so that no input, however
// pathological, makes compiling slow.
#include <algorithm>
#include <deque>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/grammar/grammar_builder.h"

namespace textgen {

using Edge = Grammar::Edge;
using EdgeKind = Grammar::EdgeKind;
using ByteSet = std::array<uint64_t, 4>;

namespace {

bool OrInto(ByteSet* dst, const ByteSet& src) {
  bool changed = false;
  for (int i = 0; i < 4; ++i) {
    uint64_t v = (*dst)[i] | src[i];
    changed |= v != (*dst)[i];
    (*dst)[i] = v;
  }
  return changed;
}

void AddRange(ByteSet* s, uint8_t lo, uint8_t hi) {
  for (int b = lo; b <= hi; ++b) (*s)[b >> 6] |= uint64_t{1} << (b & 63);
}

}  // namespace

// Horn clauses over facts "node v reaches its rule's end without input" (fact v) and "rule r is
// nullable" (fact N + r), solved by counting unsatisfied premises (linear time).
void GrammarBuilder::ComputeNullable() {
  const auto& nodes = g_->nodes_;
  const auto& edges = g_->edges_;
  auto& rules = g_->rules_;
  const int32_t n = static_cast<int32_t>(nodes.size());
  const int32_t num_facts = n + static_cast<int32_t>(rules.size());
  struct Clause {
    int32_t head;
    int32_t missing;
  };
  std::vector<Clause> clauses;
  std::vector<std::vector<int32_t>> watchers(num_facts);
  std::vector<bool> fact(num_facts, false);
  std::vector<int32_t> queue;
  auto add_clause = [&](int32_t head, std::initializer_list<int32_t> premises) {
    int32_t id = static_cast<int32_t>(clauses.size());
    clauses.push_back(Clause{head, static_cast<int32_t>(premises.size())});
    for (int32_t p : premises) watchers[p].push_back(id);
  };
  for (int32_t v = 0; v < n; ++v) {
    const Grammar::Node& node = nodes[v];
    if (node.final) queue.push_back(v);
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Edge& e = edges[i];
      if (e.kind == EdgeKind::kEpsilon) add_clause(v, {e.target});
      if (e.kind == EdgeKind::kCall) add_clause(v, {n + e.arg, e.target});
    }
    if (node.rep_rule >= 0) {
      if (node.rep_min == 0) {
        add_clause(v, {node.rep_next});
      } else {
        add_clause(v, {n + node.rep_rule, node.rep_next});
      }
    }
  }
  for (size_t r = 0; r < rules.size(); ++r)
    add_clause(n + static_cast<int32_t>(r), {rules[r].start});
  for (int32_t f : queue) fact[f] = true;
  while (!queue.empty()) {
    int32_t f = queue.back();
    queue.pop_back();
    for (int32_t c : watchers[f]) {
      if (--clauses[c].missing == 0 && !fact[clauses[c].head]) {
        fact[clauses[c].head] = true;
        queue.push_back(clauses[c].head);
      }
    }
  }
  reach_end_.assign(fact.begin(), fact.begin() + n);
  for (size_t r = 0; r < rules.size(); ++r) rules[r].nullable = fact[n + r];
  // x{m,n} with a nullable x is x{0,n}: missing iterations can be empty ones. Matchers never
  // take an empty iteration (it could only lose options), so the minimum must go.
  for (Grammar::Node& node : g_->nodes_) {
    if (node.rep_rule >= 0 && rules[node.rep_rule].nullable) node.rep_min = 0;
  }
}

// A rule that can call itself before consuming input would push frames forever; llama.cpp
// refuses such grammars too ("left recursion").
absl::Status GrammarBuilder::CheckLeftRecursion() const {
  const auto& nodes = g_->nodes_;
  const auto& edges = g_->edges_;
  const auto& rules = g_->rules_;
  const size_t num_rules = rules.size();
  // Rule A -> rule B when A can call B before consuming anything.
  std::vector<std::vector<int32_t>> left_calls(num_rules);
  std::vector<bool> seen(nodes.size(), false);
  std::vector<int32_t> todo;
  for (size_t a = 0; a < num_rules; ++a) {
    todo.assign(1, rules[a].start);
    seen[rules[a].start] = true;
    while (!todo.empty()) {
      int32_t v = todo.back();
      todo.pop_back();
      auto visit = [&](int32_t t) {
        if (!seen[t]) {
          seen[t] = true;
          todo.push_back(t);
        }
      };
      const Grammar::Node& node = nodes[v];
      for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
        const Edge& e = edges[i];
        if (e.kind == EdgeKind::kEpsilon) visit(e.target);
        if (e.kind == EdgeKind::kCall) {
          left_calls[a].push_back(e.arg);
          if (rules[e.arg].nullable) visit(e.target);
        }
      }
      if (node.rep_rule >= 0) {
        left_calls[a].push_back(node.rep_rule);
        if (node.rep_min == 0) visit(node.rep_next);
      }
    }
  }
  // Iterative DFS for a cycle; 0 = new, 1 = on the path, 2 = done.
  std::vector<uint8_t> color(num_rules, 0);
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t s = 0; s < num_rules; ++s) {
    if (color[s] != 0) continue;
    path.assign(1, {static_cast<int32_t>(s), 0});
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left_calls[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      int32_t callee = left_calls[r][next++];
      if (color[callee] == 1) {
        // Name a rule the user wrote: generated rules (repetition bodies) are named after
        // theirs; prefer the first user rule on the cycle.
        std::string name = rules[callee].name;
        for (auto it = path.rbegin(); it != path.rend(); ++it) {
          if (static_cast<size_t>(it->first) < parsed_.names.size()) {
            name = rules[it->first].name;
          }
          if (it->first == callee) break;
        }
        return absl::InvalidArgumentError(
            absl::StrCat("left recursion: rule '", name,
                         "' can reach itself without consuming input (not supported, as in "
                         "llama.cpp)"));
      }
      if (color[callee] == 0) {
        color[callee] = 1;
        path.push_back({callee, 0});
      }
    }
  }
  return absl::OkStatus();
}

void GrammarBuilder::ComputeFollow() {
  const auto& nodes = g_->nodes_;
  const auto& edges = g_->edges_;
  auto& rules = g_->rules_;
  const int32_t n = static_cast<int32_t>(nodes.size());
  // first[v]: bytes that can be consumed first from node v (without leaving its rule).
  std::vector<ByteSet> first(n, ByteSet{});
  std::vector<std::vector<int32_t>> users(n);  // first[v] feeds first[user]
  for (int32_t v = 0; v < n; ++v) {
    const Grammar::Node& node = nodes[v];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Edge& e = edges[i];
      if (e.kind == EdgeKind::kByte) AddRange(&first[v], e.lo, e.hi);
      if (e.kind == EdgeKind::kEpsilon) users[e.target].push_back(v);
      if (e.kind == EdgeKind::kCall) {
        users[rules[e.arg].start].push_back(v);
        if (rules[e.arg].nullable) users[e.target].push_back(v);
      }
    }
    if (node.rep_rule >= 0) {
      users[rules[node.rep_rule].start].push_back(v);
      users[node.rep_next].push_back(v);
    }
  }
  std::deque<int32_t> work;
  std::vector<bool> queued(n, true);
  for (int32_t v = 0; v < n; ++v) work.push_back(v);
  while (!work.empty()) {
    int32_t v = work.front();
    work.pop_front();
    queued[v] = false;
    for (int32_t u : users[v]) {
      if (OrInto(&first[u], first[v]) && !queued[u]) {
        queued[u] = true;
        work.push_back(u);
      }
    }
  }
  // follow[R] ⊇ first(return node), and ⊇ follow[caller] when the return node can end the caller.
  const size_t num_rules = rules.size();
  std::vector<std::vector<int32_t>> follow_users(num_rules);
  for (int32_t v = 0; v < n; ++v) {
    const Grammar::Node& node = nodes[v];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Edge& e = edges[i];
      if (e.kind != EdgeKind::kCall) continue;
      OrInto(&rules[e.arg].follow, first[e.target]);
      if (reach_end_[e.target]) follow_users[node.rule].push_back(e.arg);
    }
    if (node.rep_rule >= 0) {
      OrInto(&rules[node.rep_rule].follow, first[v]);  // another iteration or what follows
      if (reach_end_[node.rep_next]) follow_users[node.rule].push_back(node.rep_rule);
    }
  }
  std::deque<int32_t> rwork;
  std::vector<bool> rqueued(num_rules, true);
  for (size_t r = 0; r < num_rules; ++r) rwork.push_back(static_cast<int32_t>(r));
  while (!rwork.empty()) {
    int32_t r = rwork.front();
    rwork.pop_front();
    rqueued[r] = false;
    for (int32_t callee : follow_users[r]) {
      if (OrInto(&rules[callee].follow, rules[r].follow) && !rqueued[callee]) {
        rqueued[callee] = true;
        rwork.push_back(callee);
      }
    }
  }
}

void GrammarBuilder::ComputeStaticReturns() {
  const auto& nodes = g_->nodes_;
  const auto& edges = g_->edges_;
  auto& rules = g_->rules_;
  const size_t num_rules = rules.size();
  std::vector<int32_t> call_sites(num_rules, 0);
  std::vector<int32_t> site_node(num_rules, -1), site_return(num_rules, -1);
  call_sites[g_->root_] = 1;  // the start: nothing below it
  for (size_t v = 0; v < nodes.size(); ++v) {
    const Grammar::Node& node = nodes[v];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Edge& e = edges[i];
      if (e.kind != EdgeKind::kCall) continue;
      if (++call_sites[e.arg] == 1) {
        site_node[e.arg] = static_cast<int32_t>(v);
        site_return[e.arg] = e.target;
      }
    }
    if (node.rep_rule >= 0) call_sites[node.rep_rule] += 2;  // counts vary: never fixed
  }
  // A tail call leaves no frame of its own: the rule returns where its caller would.
  for (size_t r = 0; r < num_rules; ++r) {
    int32_t cur = static_cast<int32_t>(r);
    int32_t result = -1;
    for (size_t steps = 0; steps <= num_rules; ++steps) {
      if (call_sites[cur] != 1 || site_node[cur] < 0) break;
      int32_t ret = site_return[cur];
      if (!nodes[ret].tail) {
        result = ret;
        break;
      }
      cur = nodes[site_node[cur]].rule;
    }
    rules[r].static_return = result;
  }
}

}  // namespace textgen
