#include "engine/decoding/single_chooser.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/decoding/top_logprobs.h"
#include "engine/ops/softmax.h"
#include "engine/util/status_macros.h"

namespace textgen {

SingleChooser::SingleChooser(const Tokenizer& tokenizer, const DecodingOptions& options, int vocab,
                             std::vector<int32_t> prompt,
                             std::unique_ptr<TokenConstraint> constraint)
    : tok_(tokenizer),
      vocab_(vocab),
      max_new_tokens_(options.max_new_tokens),
      top_logprobs_(options.top_logprobs),
      ignore_eos_(options.ignore_eos),
      repetition_penalty_(options.sampling.repetition_penalty),
      constraint_(std::move(constraint)),
      context_(std::move(prompt)),
      row_logprobs_(vocab),
      processed_(vocab) {
  if (options.method == DecodingMethod::kSample && options.sampling.temperature > 0) {
    sampler_.emplace(options.sampling);
  }
  if (constraint_ != nullptr) masked_.resize(vocab);
}

absl::StatusOr<TokenChoice> SingleChooser::Choose(const float* raw) {
  // Logprobs report the model's own distribution; the choice is made among allowed tokens.
  ops::LogSoftmax(raw, vocab_, row_logprobs_.data());
  TG_ASSIGN_OR_RETURN(const float* logits,
                      ApplyConstraint(constraint_.get(), raw, vocab_, masked_.data()));
  const int32_t id = Pick(logits);
  std::vector<TokenLogprob> top;
  if (top_logprobs_ > 0) top = TopLogprobs(row_logprobs_, top_logprobs_);
  if (constraint_ != nullptr && !constraint_->Accept(id)) {
    return absl::InternalError(
        absl::StrCat("the output constraint refused token ", id, ", which its own mask allowed"));
  }
  const double logprob = row_logprobs_[id];
  ids_.push_back(id);
  context_.push_back(id);
  logprobs_.push_back(logprob);
  certain_.push_back(GeneratedToken{id, std::string(), logprob, std::move(top)});
  TokenChoice choice;
  choice.end = EndAfter(id);
  if (!choice.end) choice.next.push_back(BeamChoice{0, id});
  return choice;
}

int32_t SingleChooser::Pick(const float* logits) {
  if (sampler_) return sampler_->Sample(absl::MakeConstSpan(logits, vocab_), context_);
  std::memcpy(processed_.data(), logits, vocab_ * sizeof(float));
  if (repetition_penalty_ != 1.0f) {
    ApplyRepetitionPenalty(repetition_penalty_, context_, absl::MakeSpan(processed_));
  }
  return static_cast<int32_t>(ops::ArgMax(processed_.data(), vocab_));
}

std::optional<FinishReason> SingleChooser::EndAfter(int32_t id) const {
  if ((id == tok_.eos_id() || tok_.IsEog(id)) && !ignore_eos_) return FinishReason::kEos;
  if (constraint_ != nullptr && constraint_->Complete()) return FinishReason::kConstraintComplete;
  if (static_cast<int>(ids_.size()) >= max_new_tokens_) return FinishReason::kLength;
  return std::nullopt;
}

std::vector<GeneratedToken> SingleChooser::TakeCertain() { return std::exchange(certain_, {}); }

std::vector<GeneratedToken> SingleChooser::End() { return std::exchange(certain_, {}); }

std::vector<Hypothesis> SingleChooser::Results(FinishReason finish, std::string streamed) {
  Hypothesis h;
  h.ids = ids_;
  h.logprobs = logprobs_;
  h.text = std::move(streamed);
  for (double lp : logprobs_) h.cum_logprob += lp;
  h.score = h.cum_logprob;
  h.finish_reason = finish;
  return {std::move(h)};
}

}  // namespace textgen
