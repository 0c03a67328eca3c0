// Drafting with a small model that shares the target's vocabulary (speculative decoding's
// --draft-model): the draft model's greedy continuation of the text so far.
//
// The drafter keeps its own K/V of the text in the draft model's pool and, on each Propose,
// first rolls it back to the longest prefix it shares with the new text (the target rejected
// the rest of the last draft), feeds what is new, then drafts one token per pass. Drafts are
// greedy, so the speculative sampler treats them as point masses (see speculative_sampling.h):
// the output is the target's whatever the draft model says; only the acceptance rate depends
// on it.
#ifndef TEXTGEN_ENGINE_DECODING_MODEL_DRAFTER_H_
#define TEXTGEN_ENGINE_DECODING_MODEL_DRAFTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache/block_table.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"

namespace textgen {

// Not thread-safe; one per sequence. Borrows the model and its cache (a pool of the draft
// model's shape, without a prefix cache: the drafter truncates its blocks in place), which must
// outlive it.
class ModelDrafter {
 public:
  ModelDrafter(CausalLm& model, KvCache& cache);
  ~ModelDrafter();  // releases its blocks
  ModelDrafter(const ModelDrafter&) = delete;
  ModelDrafter& operator=(const ModelDrafter&) = delete;

  // Fills `out` (cleared first) with up to `max_tokens` greedy tokens after `text` (the prompt
  // and the tokens chosen so far). Nothing is drafted (OK, `out` empty) when `text` is empty,
  // max_tokens <= 0, or the text and draft would not fit the draft model's context. Errors of
  // the draft pass (ResourceExhausted when the draft pool is full) leave the drafter empty
  // (its blocks released): the caller decodes without a draft this step.
  absl::Status Propose(absl::Span<const int32_t> text, int max_tokens, std::vector<int32_t>* out);

  // Releases the blocks (e.g. when the request ends or waits).
  void Reset();
  // Tokens whose K/V the drafter holds (a prefix of the last text plus its drafts but the last).
  int computed_tokens() const { return static_cast<int>(computed_.size()); }

 private:
  // Runs `tokens` after what the cache holds; the argmax of the last row into *next.
  absl::Status Feed(absl::Span<const int32_t> tokens, int32_t* next);

  CausalLm& model_;
  KvCache& cache_;
  BlockTable table_;
  std::vector<int32_t> computed_;  // the tokens table_ holds, in order
  std::vector<float> logits_;      // [1, n_vocab]
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_MODEL_DRAFTER_H_
