// The reasoning gate on a toy vocabulary, step by step: reasoning is free, its budget forces the
// closing tag, the answer after it follows the inner constraint, and clones keep their state.
#include "engine/constraint/reasoning_gate.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/constraint/grammar_constraint.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar_vocab.h"

namespace textgen {
namespace reasoning_gate_test {

// id: 0 "<think>", 1 "</think>", 2 "a", 3 "b", 4 "{", 5 "}", 6 " ", 7 "</", 8 "think>", 9 EOS.
const std::vector<std::string> kTokens = {"<think>", "</think>", "a",  "b",      "{",
                                          "}",       " ",        "</", "think>", ""};

std::shared_ptr<const GrammarVocab> Vocab() { return GrammarVocab::FromTokens(kTokens, {9}); }

std::string_view Text(int32_t id) { return kTokens[static_cast<size_t>(id)]; }

std::shared_ptr<const ReasoningTags> Tags() {
  auto t = std::make_shared<ReasoningTags>();
  t->open = "<think>";
  t->close = "</think>";
  t->open_id = 0;
  t->close_ids = {1};
  return t;
}

std::unique_ptr<TokenConstraint> Braces() {
  auto g = CompiledGrammar::GetOrCompile(R"(root ::= "{" "}")", "root", Vocab());
  REQUIRE(g.ok());
  return std::make_unique<GrammarConstraint>(*g);
}

// The ids Mask leaves finite.
std::vector<int32_t> Allowed(const TokenConstraint& c) {
  std::vector<float> logits(kTokens.size(), 0.0f);
  c.Mask(absl::MakeSpan(logits));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

TEST_CASE("reasoning is free, the answer follows the inner constraint", "[constraint][reasoning]") {
  ReasoningGate g(Tags(), ReasoningGate::Start::kMayOpen, std::nullopt, Braces(), Text);
  // At the start: the inner constraint's first token, or the open tag.
  CHECK(Allowed(g) == std::vector<int32_t>{0, 4});
  REQUIRE(g.Accept(0));
  CHECK(Allowed(g).size() == kTokens.size());  // inside: anything
  REQUIRE(g.Accept(2));
  REQUIRE(g.Accept(7));  // "</" + "think>": the tag closes in pieces too
  REQUIRE(g.Accept(8));
  CHECK(Allowed(g) == std::vector<int32_t>{4});
  REQUIRE(g.Accept(4));
  CHECK_FALSE(g.Complete());
  REQUIRE(g.Accept(5));
  CHECK(g.Complete());
  CHECK(g.reasoning_tokens() == 3);
}

TEST_CASE("the budget forces the closing tag", "[constraint][reasoning]") {
  ReasoningGate g(Tags(), ReasoningGate::Start::kInside, 2, Braces(), Text);
  REQUIRE(g.Accept(2));
  auto clone = g.Clone();
  REQUIRE(g.Accept(3));
  CHECK(Allowed(g) == std::vector<int32_t>{1});  // forced
  CHECK_FALSE(g.Accept(2));
  REQUIRE(g.Accept(1));
  CHECK(Allowed(g) == std::vector<int32_t>{4});
  // The clone is where g was after one token: one more of reasoning left.
  CHECK(Allowed(*clone).size() == kTokens.size());
  REQUIRE(clone->Accept(1));  // the model closes it itself
  CHECK(Allowed(*clone) == std::vector<int32_t>{4});

  ReasoningGate zero(Tags(), ReasoningGate::Start::kInside, 0, nullptr, Text);
  CHECK(Allowed(zero) == std::vector<int32_t>{1});
}

TEST_CASE("without an inner constraint the answer is free and never complete",
          "[constraint][reasoning]") {
  ReasoningGate g(Tags(), ReasoningGate::Start::kMayOpen, 1, nullptr, Text);
  CHECK(Allowed(g).size() == kTokens.size());
  REQUIRE(g.Accept(0));  // opens
  REQUIRE(g.Accept(2));  // the budget of 1 is spent
  CHECK(Allowed(g) == std::vector<int32_t>{1});
  REQUIRE(g.Accept(1));
  CHECK(Allowed(g).size() == kTokens.size());
  CHECK_FALSE(g.Complete());
  // An answer that does not open a block: free from the start, the budget never applies.
  ReasoningGate plain(Tags(), ReasoningGate::Start::kMayOpen, 1, nullptr, Text);
  REQUIRE(plain.Accept(2));
  REQUIRE(plain.Accept(3));
  CHECK(Allowed(plain).size() == kTokens.size());
}

TEST_CASE("after a block the prompt closed, none opens", "[constraint][reasoning]") {
  // With an inner constraint: its tokens only, not the open tag.
  ReasoningGate g(Tags(), ReasoningGate::Start::kAfter, 0, Braces(), Text);
  CHECK(Allowed(g) == std::vector<int32_t>{4});
  REQUIRE(g.Accept(4));
  REQUIRE(g.Accept(5));
  CHECK(g.Complete());
  CHECK(g.reasoning_tokens() == 0);
  // Free: everything but the open tag, throughout (a budget never forces a close).
  ReasoningGate free(Tags(), ReasoningGate::Start::kAfter, 0, nullptr, Text);
  std::vector<int32_t> all_but_open(kTokens.size() - 1);
  for (size_t i = 0; i < all_but_open.size(); ++i) all_but_open[i] = static_cast<int32_t>(i + 1);
  CHECK(Allowed(free) == all_but_open);
  REQUIRE(free.Accept(2));
  CHECK(Allowed(*free.Clone()) == all_but_open);
  CHECK_FALSE(free.Complete());
}

}  // namespace reasoning_gate_test
}  // namespace textgen
