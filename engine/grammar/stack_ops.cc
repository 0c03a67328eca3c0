#include "engine/grammar/stack_ops.h"

#include <algorithm>
#include <utility>

namespace textgen::grammar_internal {
namespace {

using EdgeKind = Grammar::EdgeKind;

// One fewer iteration needed / allowed; the unbounded and "sticky" markers stay.
uint16_t Dec(uint16_t v) {
  if (v == Frame::kInf || v == Frame::kSticky || v == 0) return v;
  return static_cast<uint16_t>(v - 1);
}

}  // namespace

void Expander::Push(Stack stack, int32_t fresh) {
  if (fresh >= static_cast<int32_t>(stack.size())) fresh = std::numeric_limits<int32_t>::max();
  work_.push_back(Item{std::move(stack), fresh});
}

void Expander::Advance(const Stack& start, Bottom bottom, ExpandResult* out) {
  const auto& nodes = g_.nodes();
  const auto& edges = g_.edges();
  const auto& rules = g_.rules();
  seen_.clear();
  work_.clear();
  Push(start, std::numeric_limits<int32_t>::max());
  while (!work_.empty()) {
    Item item = std::move(work_.back());
    work_.pop_back();
    Stack& s = item.stack;
    s.push_back(static_cast<uint64_t>(item.fresh));  // the seen key includes the marker
    bool inserted = seen_.insert(s).second;
    s.pop_back();
    if (!inserted) continue;
    if (s.empty()) {
      out->stacks.push_back(s);
      out->complete = true;
      continue;
    }
    if (static_cast<int32_t>(s.size()) > max_depth_) {
      out->overflow = true;
      continue;
    }
    const Frame top = Frame::Unpack(s.back());
    const Grammar::Node& node = nodes[top.node];
    if (node.consuming) out->stacks.push_back(s);
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Grammar::Edge& e = edges[i];
      if (e.kind == EdgeKind::kEpsilon) {
        Stack next = s;
        next.back() = g_.InitialFrame(e.target).Pack();
        Push(std::move(next), item.fresh);
      } else if (e.kind == EdgeKind::kCall) {
        Stack next = s;
        if (nodes[e.target].tail) {
          next.pop_back();  // tail call: the callee returns where this frame would have
        } else {
          next.back() = g_.InitialFrame(e.target).Pack();
        }
        next.push_back(g_.InitialFrame(rules[e.arg].start).Pack());
        Push(std::move(next), item.fresh);
      }
    }
    if (node.rep_rule >= 0) {
      if (top.rem_max > 0) {
        Stack next = s;
        next.back() = Frame{top.node, Dec(top.rem_min), Dec(top.rem_max)}.Pack();
        next.push_back(g_.InitialFrame(rules[node.rep_rule].start).Pack());
        Push(std::move(next), std::min(item.fresh, static_cast<int32_t>(s.size()) - 1));
      }
      if (top.rem_min == 0) {
        Stack next = s;
        next.back() = g_.InitialFrame(node.rep_next).Pack();
        Push(std::move(next), item.fresh);
      }
    }
    if (node.final) {
      Stack next = s;
      next.pop_back();
      if (!next.empty()) {
        // Returning into a repeat frame that called its body during this same advance would
        // be an empty iteration: it only loses options, so it is never taken.
        const Frame below = Frame::Unpack(next.back());
        if (nodes[below.node].rep_rule >= 0 &&
            static_cast<int32_t>(next.size()) - 1 >= item.fresh) {
          continue;
        }
        Push(std::move(next), item.fresh);
      } else if (bottom == Bottom::kWhole) {
        Push(std::move(next), item.fresh);
      } else {
        const Grammar::Rule& rule = rules[node.rule];
        if (rule.static_return >= 0) {
          Push(Stack{g_.InitialFrame(rule.static_return).Pack()},
               std::numeric_limits<int32_t>::max());
        } else {
          out->exited = true;
          for (int w = 0; w < 4; ++w) out->exit_follow[w] |= rule.follow[w];
        }
      }
    }
  }
}

void Expander::Step(const std::vector<Stack>& in, uint8_t b, Bottom bottom, ExpandResult* out) {
  const auto& nodes = g_.nodes();
  const auto& edges = g_.edges();
  for (const Stack& s : in) {
    if (s.empty()) continue;
    const Grammar::Node& node = nodes[Frame::Unpack(s.back()).node];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Grammar::Edge& e = edges[i];
      if (e.kind != EdgeKind::kByte || b < e.lo || b > e.hi) continue;
      Stack next = s;
      next.back() = g_.InitialFrame(e.target).Pack();
      Advance(next, bottom, out);
    }
  }
}

void Expander::StepToken(const std::vector<Stack>& in, const std::vector<int32_t>& ref_ids,
                         int32_t token, bool is_eog, ExpandResult* out) {
  const auto& nodes = g_.nodes();
  const auto& edges = g_.edges();
  for (const Stack& s : in) {
    if (s.empty()) continue;
    const Grammar::Node& node = nodes[Frame::Unpack(s.back()).node];
    for (uint32_t i = node.edge_begin; i < node.edge_end; ++i) {
      const Grammar::Edge& e = edges[i];
      bool match = (e.kind == EdgeKind::kToken && ref_ids[e.arg] == token) ||
                   (e.kind == EdgeKind::kNotToken && !is_eog && ref_ids[e.arg] != token);
      if (!match) continue;
      Stack next = s;
      next.back() = g_.InitialFrame(e.target).Pack();
      Advance(next, Bottom::kWhole, out);
    }
  }
}

void Canonicalize(std::vector<Stack>* stacks, int32_t max_stacks) {
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
  if (static_cast<int64_t>(stacks->size()) > max_stacks) stacks->resize(max_stacks);
}

}  // namespace textgen::grammar_internal
