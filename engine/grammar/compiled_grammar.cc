#include "engine/grammar/compiled_grammar.h"

#include <list>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/grammar/mask_cache.h"
#include "engine/util/status_macros.h"

namespace textgen {

CompiledGrammar::~CompiledGrammar() = default;

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
    const GrammarLimits& limits) {
  std::shared_ptr<CompiledGrammar> c(new CompiledGrammar());
  const auto& refs = grammar->token_refs();
  c->token_ids_.assign(refs.size(), -1);
  if (vocab != nullptr) {
    for (size_t i = 0; i < refs.size(); ++i) {
      const Grammar::TokenRef& ref = refs[i];
      if (ref.id >= 0) {
        if (ref.id >= vocab->size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token element <[", ref.id, "]>: the vocabulary has ", vocab->size(), " tokens"));
        }
        c->token_ids_[i] = ref.id;
      } else {
        int32_t id = vocab->FindText(ref.text);
        if (id < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token element ", ref.text, ": no special token of the vocabulary has this text"));
        }
        c->token_ids_[i] = id;
      }
    }
  }
  c->grammar_ = std::move(grammar);
  c->vocab_ = std::move(vocab);
  c->limits_ = limits;
  c->cache_ = std::make_unique<grammar_internal::MaskCache>(*c);
  return std::shared_ptr<const CompiledGrammar>(std::move(c));
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::GetOrCompile(
    std::string_view gbnf, std::string_view root, std::shared_ptr<const GrammarVocab> vocab,
    const GrammarLimits& limits) {
  struct Entry {
    const GrammarVocab* vocab;
    std::string gbnf, root;
    std::shared_ptr<const CompiledGrammar> compiled;
  };
  static std::mutex mu;
  static auto* lru = new std::list<Entry>();  // most recent first
  constexpr size_t kCapacity = 64;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = lru->begin(); it != lru->end(); ++it) {
      // Same limits too: a grammar refused under tighter limits must not come back compiled.
      const GrammarLimits& l = it->compiled->limits();
      if (it->vocab == vocab.get() && it->gbnf == gbnf && it->root == root &&
          std::tie(l.max_input_bytes, l.max_rules, l.max_nodes, l.max_nesting, l.max_literal_bytes,
                   l.max_repetition, l.max_stacks, l.max_stack_depth) ==
              std::tie(limits.max_input_bytes, limits.max_rules, limits.max_nodes,
                       limits.max_nesting, limits.max_literal_bytes, limits.max_repetition,
                       limits.max_stacks, limits.max_stack_depth)) {
        lru->splice(lru->begin(), *lru, it);
        return lru->front().compiled;
      }
    }
  }
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, ParseGbnf(gbnf, root, limits));
  TG_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> compiled,
                      Compile(std::move(grammar), vocab, limits));
  std::lock_guard<std::mutex> lock(mu);
  lru->push_front(Entry{vocab.get(), std::string(gbnf), std::string(root), compiled});
  if (lru->size() > kCapacity) lru->pop_back();
  return compiled;
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const { return cache_->stats(); }

}  // namespace textgen
