// GbnfBuilder: the converters' grammar under construction, as expressions (literals, character
// sets, sequences, alternatives, bounded repetitions, rule references) and named rules. It
// enforces the size and time budget while a grammar is built, checks the finished grammar
// (every rule productive, no left recursion), computes the longest text it accepts, and prints
// it as GBNF (llama.cpp's grammar syntax).
#ifndef TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_IR_H_
#define TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_IR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/grammar/regex_charset.h"

namespace textgen::json_schema_internal {

struct BuildLimits {
  int64_t max_rules = 5000;
  // Weighted size, about the automaton nodes a GBNF engine builds: a literal counts its bytes,
  // a character set its ranges plus 4, a reference 1, an operator 1 plus its operands. A
  // repetition counts its operand once: the engine counts iterations instead of copying.
  int64_t max_size = 200000;
  absl::Time deadline = absl::InfiniteFuture();
};

// The largest m or n of an x{m,n} that the engine takes; Repeat builds larger counts from
// several (without ambiguity, so that the engine's parse stacks stay few).
inline constexpr int64_t kMaxPrintedRepetition = 65000;
// Repeat treats larger maxima as unbounded (no generation is that long) and refuses larger
// minima as too complex.
inline constexpr int64_t kUnboundedAbove = 16000000;
inline constexpr int64_t kMaxMinimumRepetition = 4000000;
// Literals print in pieces of at most this many bytes (the engine's limit is 65536).
inline constexpr size_t kMaxPrintedLiteral = 60000;

// A built grammar.
struct GbnfGrammar {
  std::string text;                  // GBNF rules, the root first
  std::optional<int64_t> max_bytes;  // longest accepted text in UTF-8 bytes; nullopt: unbounded
  int rules = 0;                     // rules printed
};

// Not thread-safe. Expressions are immutable handles into the builder and may be shared.
class GbnfBuilder {
 public:
  using Expr = int32_t;

  // Rule 0 is the root, named `root_name`; every other rule is named `root_name` + "-" + a hint.
  GbnfBuilder(std::string root_name, BuildLimits limits);

  Expr Never() const { return kNeverExpr; }  // the empty language
  Expr Empty() const { return kEmptyExpr; }  // the empty text
  Expr Literal(std::string_view utf8);       // exactly this text
  Expr Chars(const CodePointSet& set);       // one code point of the set (Never if empty)
  Expr Seq(std::vector<Expr> items);
  Expr Alt(std::vector<Expr> items);
  Expr Repeat(Expr e, int64_t min, int64_t max);  // max < 0: unbounded; see kUnboundedAbove
  Expr Optional(Expr e) { return Repeat(e, 0, 1); }

  static constexpr int kRoot = 0;
  // A new rule whose name starts with root_name + "-" + `hint` (sanitized, made unique);
  // `origin` (a JSON pointer or a description) names it in error messages.
  int NewRule(std::string_view hint, std::string origin);
  void Define(int rule, Expr body);
  Expr Ref(int rule);
  const std::string& rule_name(int rule) const { return rules_[rule].name; }

  // The first budget error (size, rule count or deadline: ResourceExhausted is never used;
  // these are InvalidArgument "too complex" so that clients see them as bad requests). Once
  // set, constructors return Never and Define does nothing.
  const absl::Status& status() const { return status_; }
  void Fail(absl::Status status);
  // Checks the deadline (cheap enough to call per schema node).
  const absl::Status& CheckDeadline();
  int64_t size() const { return total_size_; }

  // Checks and prints the grammar from the root. InvalidArgument `empty_message` if the root
  // accepts nothing, or naming the rule's origin if a rule is left-recursive.
  absl::StatusOr<GbnfGrammar> Finish(const std::string& empty_message);

 private:
  enum class Kind : uint8_t { kNever, kEmpty, kLiteral, kChars, kSeq, kAlt, kRepeat, kRef };
  struct Node {
    Kind kind = Kind::kNever;
    std::string literal;       // kLiteral
    CodePointSet chars;        // kChars
    std::vector<Expr> kids;    // kSeq, kAlt; kRepeat: one
    int64_t min = 0, max = 0;  // kRepeat
    int rule = -1;             // kRef
    int64_t weight = 1;
    int depth = 0;  // nesting of sequences, alternatives and repetitions
  };
  static Node MakeNode(Kind kind) {
    Node node;
    node.kind = kind;
    return node;
  }
  struct Rule {
    std::string name;
    std::string origin;
    Expr body = -1;  // -1 until defined
  };
  static constexpr Expr kNeverExpr = 0;
  static constexpr Expr kEmptyExpr = 1;
  static constexpr int64_t kInf = INT64_MAX / 4;
  static constexpr int kMaxDepth = 24;

  Expr Add(Node node);
  // Moves kids nested kMaxDepth deep into rules of their own, so that no expression nests
  // deeper (the engine limits parentheses to 100; printing and analysis recurse per level).
  void Hoist(std::vector<Expr>& kids);
  int Depth(const std::vector<Expr>& kids) const;
  int64_t MinBytes(Expr e, const std::vector<int64_t>& rule_min) const;
  absl::Status ComputeMinBytes(std::vector<int64_t>& rule_min);
  void LiveRefs(Expr e, bool left_only, std::vector<int>& out) const;
  int64_t MaxBytes(Expr e, const std::vector<int64_t>& rule_max) const;
  // prec: 0 a rule body, 1 an element of a sequence or alternative, 2 a repetition's operand.
  void Print(Expr e, int prec, std::string& out) const;

  std::string root_name_;
  BuildLimits limits_;
  std::vector<Node> nodes_;
  std::vector<Rule> rules_;
  absl::flat_hash_set<std::string> names_;
  absl::flat_hash_map<std::string, Expr> literals_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, Expr> char_sets_;
  std::vector<int64_t> node_min_;  // per node, once Finish computed it
  int64_t total_size_ = 0;
  absl::Status status_;
};

// A valid rule name for root_name parameters: [A-Za-z0-9-]+ (llama.cpp's; textgen's parser
// also takes '_').
bool IsGbnfName(std::string_view name);

// GBNF spellings, shared with the tests.
std::string GbnfQuote(std::string_view utf8);        // a literal: "..."
std::string GbnfCharClass(const CodePointSet& set);  // [...]

}  // namespace textgen::json_schema_internal

#endif  // TEXTGEN_ENGINE_GRAMMAR_JSON_SCHEMA_IR_H_
