// A grammar bound to a vocabulary: token elements resolved to ids, and the cache of per-state
// token masks that GrammarMatcher::FillNextTokenMask reads.
#ifndef TEXTGEN_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_
#define TEXTGEN_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_vocab.h"

namespace textgen {

namespace grammar_internal {
class MaskCache;
}

// Immutable apart from its internal mask cache, which is synchronized: one CompiledGrammar is
// shared by every request using the grammar, on any thread.
class CompiledGrammar {
 public:
  // InvalidArgument naming the token element when a `<text>` element names no token of the
  // vocabulary or `<[id]>` is out of range. Cheap: masks are computed lazily, per grammar state,
  // the first time a matcher needs them. `vocab` may be null: a matcher of the result accepts
  // strings only (AcceptString, CanEnd; no token methods).
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
      const GrammarLimits& limits = {});

  // ParseGbnf + Compile, memoized process-wide by (vocab, gbnf, root): an agent sending the same
  // tools with every request parses once and shares one warm mask cache. Keeps the most
  // recently used grammars (up to 64).
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GetOrCompile(
      std::string_view gbnf, std::string_view root, std::shared_ptr<const GrammarVocab> vocab,
      const GrammarLimits& limits = {});

  ~CompiledGrammar();

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  const GrammarVocab* vocab() const { return vocab_.get(); }
  const GrammarLimits& limits() const { return limits_; }
  // Grammar::token_refs() index -> token id.
  const std::vector<int32_t>& token_ids() const { return token_ids_; }

  // Mask-cache statistics (for benchmarks): cached grammar states, and their total bytes.
  struct CacheStats {
    int64_t entries = 0;
    int64_t bytes = 0;
    int64_t hits = 0;
    int64_t misses = 0;
  };
  CacheStats cache_stats() const;

  // Internal (GrammarMatcher's masks); thread-safe.
  grammar_internal::MaskCache& mask_cache() const { return *cache_; }

 private:
  CompiledGrammar() = default;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarLimits limits_;
  std::vector<int32_t> token_ids_;
  std::unique_ptr<grammar_internal::MaskCache> cache_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_GRAMMAR_COMPILED_GRAMMAR_H_
