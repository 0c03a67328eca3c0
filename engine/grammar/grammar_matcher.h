// Per-sequence grammar state for constrained decoding: before each sampled token,
// FillNextTokenMask (or ApplyMask) says which token ids the grammar allows; the chosen token is
// then passed to AcceptToken.
//
//   auto grammar = ParseGbnf(gbnf);                                   // once
//   auto vocab = GrammarVocab::Create(tokenizer);                     // once per tokenizer
//   auto compiled = CompiledGrammar::Compile(*grammar, vocab);        // shared by requests
//   GrammarMatcher m(*compiled);                                      // per sequence
//   m.ApplyMask(logits); id = Sample(logits); m.AcceptToken(id);
//   if (m.IsTerminated()) finish with "stop";
#ifndef TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
#define TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/types/span.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/token_bitmask.h"

namespace textgen {

namespace grammar_internal {
struct MatcherState;
}

// A value type: copying is O(1) (states are immutable and shared), so beam search forks a
// matcher with its beam. Not thread-safe per object (distinct copies may be used on distinct
// threads; the shared CompiledGrammar is thread-safe).
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> compiled);
  // Strings only (no vocabulary): AcceptString, CanEnd, IsTerminated, Rollback.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Sets the bit of every token allowed next and clears the others; `mask` is resized to the
  // vocabulary. EOG tokens are set iff CanEnd() (or a token element names them); after an EOG
  // token was accepted nothing is allowed.
  void FillNextTokenMask(TokenBitmask* mask) const;
  // Sets every disallowed logit to -inf. Logits past the vocabulary (padded output rows) are
  // disallowed.
  void ApplyMask(absl::Span<float> logits) const;

  // Advances by one token; false (state unchanged) if the grammar does not allow it here.
  // An EOG token is allowed where CanEnd(); it ends the sentence (nothing is allowed after it).
  bool AcceptToken(int32_t id);
  // Advances by raw bytes forced into the stream (a lazy grammar starting mid-text, a prefix);
  // false (state unchanged) if they do not fit. Counts as one step for Rollback. The empty
  // string is accepted (and still counts).
  bool AcceptString(std::string_view bytes);

  // The input so far is a complete sentence of the grammar.
  bool CanEnd() const;
  // Complete, and nothing but EOG may follow (or an EOG token was accepted): generation can
  // stop here without waiting for EOS.
  bool IsTerminated() const;

  // Undoes the last n successful AcceptToken / AcceptString calls. False (and nothing undone) if
  // fewer than n were made.
  bool Rollback(int n);
  // Successful AcceptToken / AcceptString calls so far (what Rollback can undo).
  int num_accepted() const;

  // Live parse stacks (for tests and benchmarks).
  int num_stacks() const;

  const CompiledGrammar& compiled() const { return *compiled_; }

 private:
  bool Advance(std::shared_ptr<const grammar_internal::MatcherState> next);

  std::shared_ptr<const CompiledGrammar> compiled_;
  std::shared_ptr<const grammar_internal::MatcherState> state_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
