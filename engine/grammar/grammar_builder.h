// Internal: compiles parsed GBNF rules (gbnf_parser.h) into a Grammar's automaton and computes
// what matchers and masks need from it (nullable rules, left recursion, FOLLOW sets, fixed
// return points). Used by ParseGbnf only.
#ifndef TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_BUILDER_H_
#define TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_BUILDER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar.h"

namespace textgen {

class GrammarBuilder {
 public:
  GrammarBuilder(gbnf::ParsedGrammar parsed, const GrammarLimits& limits)
      : parsed_(std::move(parsed)), limits_(limits), g_(std::make_shared<Grammar>()) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Build(std::string_view root);

 private:
  using Expr = gbnf::Expr;

  absl::StatusOr<int32_t> NewNode(int32_t rule);
  void AddEdge(int32_t from, Grammar::Edge e);
  // Adds expr's automaton starting at node `in`; returns its end node.
  absl::StatusOr<int32_t> Compile(const Expr& expr, int32_t in, int32_t rule);
  absl::StatusOr<int32_t> CompileClass(const Expr& expr, int32_t in, int32_t rule);
  absl::StatusOr<int32_t> CompileRepeat(const Expr& expr, int32_t in, int32_t rule);
  absl::StatusOr<int32_t> NewRule(std::string name);
  // Packs per-node edge lists into Grammar's flat layout and removes epsilon-only chains.
  void Finish();

  // grammar_analysis.cc
  void ComputeNullable();
  absl::Status CheckLeftRecursion() const;
  void ComputeFollow();
  void ComputeStaticReturns();

  gbnf::ParsedGrammar parsed_;
  const GrammarLimits& limits_;
  std::shared_ptr<Grammar> g_;
  std::vector<std::vector<Grammar::Edge>> out_edges_;  // per node, while building
  std::vector<const Expr*> pending_bodies_;            // rule id -> body still to compile
  std::vector<int> generated_count_;                   // per named rule: generated children
  std::vector<bool> reach_end_;                        // node -> can reach final without input
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_BUILDER_H_
