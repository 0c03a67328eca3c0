#include "engine/decoding/speculator.h"

#include <algorithm>

namespace textgen {

Speculator::Speculator(const SpeculationOptions& options, const std::vector<int32_t>& prompt,
                       CausalLm* draft_model, KvCache* draft_cache)
    : max_draft_tokens_(options.max_draft_tokens), text_(prompt) {
  const bool use_model = options.source == DraftSource::kDraftModel && draft_model != nullptr &&
                         draft_cache != nullptr;
  if (use_model) model_ = std::make_unique<ModelDrafter>(*draft_model, *draft_cache);
  if (!use_model || !options.prediction.empty()) {
    ngram_.emplace(NgramDrafterOptions{});
    // The prediction first: the text the answer is expected to repeat is found like the prompt.
    ngram_->Append(options.prediction);
    ngram_->Append(prompt);
  }
}

void Speculator::Accept(int32_t token) {
  text_.push_back(token);
  if (ngram_) ngram_->Append(token);
}

void Speculator::Propose(int max_tokens, std::vector<int32_t>* out) {
  out->clear();
  const int k = std::min(max_tokens, max_draft_tokens_);
  if (k <= 0) return;
  if (ngram_ && ngram_->Propose(k, *out) > 0) return;
  // A failed draft pass (its pool full) only means no draft this step.
  if (model_ && !model_->Propose(text_, k, out).ok()) out->clear();
}

void Speculator::Release() {
  if (model_) model_->Reset();
}

}  // namespace textgen
