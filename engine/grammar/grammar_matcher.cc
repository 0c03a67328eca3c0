#include "engine/grammar/grammar_matcher.h"

#include <cmath>
#include <limits>
#include <utility>

#include "engine/grammar/mask_cache.h"
#include "engine/grammar/stack_ops.h"

namespace textgen {

using grammar_internal::Bottom;
using grammar_internal::Expander;
using grammar_internal::ExpandResult;
using grammar_internal::MatcherState;
using grammar_internal::Stack;

namespace {

std::shared_ptr<const CompiledGrammar> CompileTextOnly(std::shared_ptr<const Grammar> grammar) {
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> c =
      CompiledGrammar::Compile(std::move(grammar), nullptr);
  return *std::move(c);  // never fails without a vocabulary
}

}  // namespace

namespace grammar_internal {

std::shared_ptr<const MatcherState> NextState(const CompiledGrammar& compiled,
                                              const std::shared_ptr<const MatcherState>& state,
                                              int32_t id) {
  const GrammarVocab* vocab = compiled.vocab();
  if (vocab == nullptr || id < 0 || id >= vocab->size() || state->eog) return nullptr;
  const Grammar& g = compiled.grammar();
  const bool is_eog = vocab->is_eog(id);
  const bool can_end = !state->stacks.empty() && state->stacks.front().empty();
  Expander ex(g, compiled.limits().max_stack_depth);
  ExpandResult through_element;  // the token matched whole by a token element
  if (g.has_token_edges()) {
    ex.StepToken(state->stacks, compiled.token_ids(), id, is_eog, &through_element);
  }
  std::vector<Stack> stacks = std::move(through_element.stacks);
  std::string_view bytes = vocab->bytes(id);
  if (!is_eog && !bytes.empty()) {
    std::vector<Stack> cur = state->stacks;
    for (char c : bytes) {
      ExpandResult r;
      ex.Step(cur, static_cast<uint8_t>(c), Bottom::kWhole, &r);
      Canonicalize(&r.stacks, compiled.limits().max_stacks);
      cur = std::move(r.stacks);
      if (cur.empty()) break;
    }
    stacks.insert(stacks.end(), cur.begin(), cur.end());
  }
  Canonicalize(&stacks, compiled.limits().max_stacks);
  const bool eog = is_eog && can_end;
  if (stacks.empty() && !eog) return nullptr;
  auto next = std::make_shared<MatcherState>();
  next->stacks = std::move(stacks);
  next->eog = eog;
  next->prev = state;
  next->depth = state->depth + 1;
  return next;
}

}  // namespace grammar_internal

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : GrammarMatcher(CompileTextOnly(std::move(grammar))) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)) {
  const Grammar& g = compiled_->grammar();
  Expander ex(g, compiled_->limits().max_stack_depth);
  ExpandResult r;
  ex.Advance(Stack{g.InitialFrame(g.rules()[g.root_rule()].start).Pack()}, Bottom::kWhole, &r);
  auto state = std::make_shared<MatcherState>();
  state->stacks = std::move(r.stacks);
  grammar_internal::Canonicalize(&state->stacks);
  state_ = std::move(state);
}

bool GrammarMatcher::Advance(std::shared_ptr<const MatcherState> next) {
  if (next == nullptr) return false;
  state_ = std::move(next);
  return true;
}

bool GrammarMatcher::AcceptString(std::string_view bytes) {
  if (state_->eog) return false;
  Expander ex(compiled_->grammar(), compiled_->limits().max_stack_depth);
  std::vector<Stack> cur = state_->stacks;
  for (char c : bytes) {
    ExpandResult r;
    ex.Step(cur, static_cast<uint8_t>(c), Bottom::kWhole, &r);
    grammar_internal::Canonicalize(&r.stacks, compiled_->limits().max_stacks);
    if (r.stacks.empty()) return false;
    cur = std::move(r.stacks);
  }
  auto next = std::make_shared<MatcherState>();
  next->stacks = std::move(cur);
  next->prev = state_;
  next->depth = state_->depth + 1;
  return Advance(std::move(next));
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  std::shared_ptr<const MatcherState> next = grammar_internal::NextState(*compiled_, state_, id);
  return Advance(std::move(next));
}

bool GrammarMatcher::CanEnd() const {
  if (state_->eog) return true;
  return !state_->stacks.empty() && state_->stacks.front().empty();  // sorted: empty first
}

bool GrammarMatcher::IsTerminated() const {
  if (state_->eog) return true;
  return state_->stacks.size() == 1 && state_->stacks.front().empty();
}

bool GrammarMatcher::Rollback(int n) {
  if (n < 0 || n > state_->depth) return false;
  std::shared_ptr<const MatcherState> s = state_;
  for (int i = 0; i < n; ++i) s = s->prev;
  state_ = std::move(s);
  return true;
}

int GrammarMatcher::num_accepted() const { return state_->depth; }
int GrammarMatcher::num_stacks() const { return static_cast<int>(state_->stacks.size()); }

void GrammarMatcher::FillNextTokenMask(TokenBitmask* mask) const {
  const GrammarVocab* vocab = compiled_->vocab();
  const int32_t size = vocab == nullptr ? 0 : vocab->size();
  if (mask->size() != size) mask->Resize(size);
  if (vocab == nullptr) return;
  grammar_internal::FillMask(*compiled_, *state_, mask);  // clears it first
}

void GrammarMatcher::ApplyMask(absl::Span<float> logits) const {
  TokenBitmask mask;
  FillNextTokenMask(&mask);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!mask.Test(static_cast<int32_t>(i))) logits[i] = kNegInf;
  }
}

}  // namespace textgen
