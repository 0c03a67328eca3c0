// A context-free grammar compiled to a byte-level pushdown automaton: the immutable form that
// ParseGbnf produces and every matcher of the grammar shares.
//
// Each rule is a small automaton over bytes. Character classes over code points become
// alternatives of UTF-8 byte sequences, so a token whose bytes split a character needs no special
// handling. Edges consume a byte range, call another rule (pushing a return frame), match one
// whole token (GBNF's `<[id]>`, `<|text|>`, `!<[id]>`), or are epsilon moves. A bounded
// repetition `X{m,n}` is one "repeat" node that calls X's rule and counts the iterations in its
// stack frame, so `{0,1000}` costs one node, not a thousand copies.
#ifndef TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_H_
#define TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace textgen {

// Bounds on what a grammar may cost; exceeding one is InvalidArgument "grammar too complex: ...".
// The defaults admit every grammar llama.cpp's json-schema-to-grammar emits for realistic schemas
// and keep parse + compile of any input well under a second.
struct GrammarLimits {
  int64_t max_input_bytes = 1 << 20;  // GBNF text
  int32_t max_rules = 20000;          // named rules plus the ones groups and {m,n} create
  int32_t max_nodes = 500000;         // automaton nodes after expanding literals and classes
  int32_t max_nesting = 100;          // nested parentheses
  int32_t max_literal_bytes = 65536;  // one string literal, UTF-8 encoded
  int32_t max_repetition = 65000;     // m and n of {m,n} (llama.cpp refuses m > 2000 too)
  // Runtime: live parse stacks of one matcher. A pathologically ambiguous grammar (2^n parses
  // after n bytes) keeps only this many of its parses: the language narrows, memory and time
  // stay bounded. (A mask computed before the narrowing may then, rarely, allow a token whose
  // every parse was dropped: AcceptToken refuses it.)
  int32_t max_stacks = 1024;
  int32_t max_stack_depth = 4096;  // frames of one stack (nesting of recursive rules)
};

// The stack frame a matcher keeps per active rule: the node it is at and, for a repeat node, how
// many iterations it still needs (rem_min) and may still take (rem_max). Packed into 64 bits.
struct Frame {
  static constexpr uint16_t kInf = 0xFFFF;     // rem_max of an unbounded repetition
  static constexpr uint16_t kSticky = 0xFFFE;  // mask-cache keys only: "more than any token uses"
  int32_t node = 0;
  uint16_t rem_min = 0;
  uint16_t rem_max = 0;

  uint64_t Pack() const {
    return (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) |
           (static_cast<uint64_t>(rem_min) << 16) | rem_max;
  }
  static Frame Unpack(uint64_t v) {
    return Frame{static_cast<int32_t>(v >> 32), static_cast<uint16_t>(v >> 16),
                 static_cast<uint16_t>(v)};
  }
};

class Grammar {
 public:
  enum class EdgeKind : uint8_t {
    kByte,      // consumes one byte in [lo, hi]
    kEpsilon,   // moves without consuming
    kCall,      // pushes rule `arg`, resumes at `target` when it returns
    kToken,     // consumes exactly the token `arg` (an index into token_refs())
    kNotToken,  // consumes exactly one token other than token_refs()[arg] (never an EOG token)
  };
  struct Edge {
    EdgeKind kind;
    uint8_t lo = 0, hi = 0;
    int32_t target = -1;
    int32_t arg = -1;
  };
  struct Node {
    int32_t rule = -1;
    uint32_t edge_begin = 0, edge_end = 0;  // into edges()
    bool final = false;                     // the rule may return here
    bool consuming = false;  // has byte or token edges: a frame can wait here for input
    bool tail = false;       // final, no edges: a call returning here is a tail call
    // Repeat node (rep_rule >= 0): iterate rule rep_rule between rep_min and rep_max times
    // (Frame::kInf: unbounded), then continue at rep_next. A frame here carries the counts.
    int32_t rep_rule = -1;
    uint16_t rep_min = 0, rep_max = 0;
    int32_t rep_next = -1;
  };
  struct Rule {
    std::string name;  // generated rules are named "<parent>_<n>" as llama.cpp names them
    int32_t start = -1;
    bool nullable = false;  // may match the empty string
    // Return node of the rule's only call site when that is fixed (one call, not a tail call,
    // not a repeat body, not the root); -1 otherwise. Lets masks look past the rule's end.
    int32_t static_return = -1;
    // Bytes that can come first after the rule returns, in any context (FOLLOW set).
    std::array<uint64_t, 4> follow{};
  };
  // A token element: `<[id]>` (id >= 0) or `<text>` (resolved against a vocabulary when the
  // grammar is compiled for it).
  struct TokenRef {
    int32_t id = -1;
    std::string text;
  };

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<TokenRef>& token_refs() const { return token_refs_; }
  int32_t root_rule() const { return root_; }
  bool has_token_edges() const { return has_token_edges_; }

  // The initial frame for `node`: a repeat node's counts start at its bounds.
  Frame InitialFrame(int32_t node) const {
    const Node& n = nodes_[node];
    if (n.rep_rule < 0) return Frame{node, 0, 0};
    return Frame{node, n.rep_min, n.rep_max};
  }

  // The automaton as text (one line per node), for tests and debugging.
  std::string DebugString() const;

 private:
  friend class GrammarBuilder;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<Rule> rules_;
  std::vector<TokenRef> token_refs_;
  int32_t root_ = -1;
  bool has_token_edges_ = false;
};

// Parses llama.cpp's GBNF (see gbnf_parser.h for the syntax) and compiles it. InvalidArgument
// "line:column: message" for a syntax error, an undefined rule (named), a missing root, left
// recursion (naming the rule), or "grammar too complex: ..." when a limit is exceeded.
absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view gbnf,
                                                         std::string_view root = "root",
                                                         const GrammarLimits& limits = {});

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_H_
