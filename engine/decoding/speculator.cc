#include "engine/decoding/speculator.h"

#include <algorithm>
#include <chrono>

namespace textgen {

Speculator::Speculator(const SpeculationOptions& options, const std::vector<int32_t>& prompt,
                       CausalLm* draft_model, KvCache* draft_cache)
    : length_(options.max_draft_tokens, options.adaptive), text_(prompt) {
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

void Speculator::Propose(int max_tokens, const DraftCosts& costs, std::vector<int32_t>* out) {
  out->clear();
  const int k = std::min(max_tokens, length_.Next(costs));
  if (k > 0 && !(ngram_ && ngram_->Propose(k, *out) > 0) && model_) {
    // A draft model's passes are the drafting cost that adaptive K weighs (prompt lookup's is
    // negligible).
    const auto start = std::chrono::steady_clock::now();
    // A failed draft pass (its pool full) only means no draft this step.
    if (!model_->Propose(text_, k, out).ok()) out->clear();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!out->empty()) length_.Drafted(static_cast<int>(out->size()), s);
  }
  if (out->empty()) length_.ChoseWithoutDrafts();
}

void Speculator::Verified(int drafted, int accepted) { length_.Verified(drafted, accepted); }

void Speculator::Release() {
  if (model_) model_->Reset();
}

}  // namespace textgen
