#include "engine/constraint/reasoning_gate.h"

#include <limits>
#include <utility>

namespace textgen {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}

}  // namespace

ReasoningGate::ReasoningGate(std::shared_ptr<const ReasoningTags> tags, Start start,
                             std::optional<int> budget, std::unique_ptr<TokenConstraint> inner,
                             std::function<std::string_view(int32_t)> token_text)
    : tags_(std::move(tags)),
      budget_(budget),
      inner_(std::move(inner)),
      token_text_(std::move(token_text)),
      phase_(start == Start::kInside  ? Phase::kReasoning
             : start == Start::kAfter ? Phase::kAnswer
                                      : Phase::kStart),
      open_masked_(start == Start::kAfter) {
  // Without closing tokens a budget cannot be enforced.
  if (tags_->close_ids.empty()) budget_.reset();
  if (phase_ == Phase::kReasoning && budget_.has_value() && *budget_ <= 0) {
    phase_ = Phase::kClosing;
  }
}

ReasoningGate::ReasoningGate(const ReasoningGate& other)
    : tags_(other.tags_),
      budget_(other.budget_),
      inner_(other.inner_ != nullptr ? other.inner_->Clone() : nullptr),
      token_text_(other.token_text_),
      phase_(other.phase_),
      open_masked_(other.open_masked_),
      text_(other.text_),
      reasoning_tokens_(other.reasoning_tokens_),
      closing_pos_(other.closing_pos_) {}

std::unique_ptr<TokenConstraint> ReasoningGate::Clone() const {
  return std::make_unique<ReasoningGate>(*this);
}

bool ReasoningGate::Mask(absl::Span<float> logits) const {
  switch (phase_) {
    case Phase::kReasoning:
      return true;
    case Phase::kClosing: {
      const int32_t want = tags_->close_ids[closing_pos_];
      for (size_t i = 0; i < logits.size(); ++i) {
        if (static_cast<int32_t>(i) != want) logits[i] = kNegInf;
      }
      return want >= 0 && static_cast<size_t>(want) < logits.size();
    }
    case Phase::kStart: {
      if (inner_ == nullptr) return true;
      // The inner constraint's tokens, and the one that opens a block.
      const int32_t open = tags_->open_id;
      const float open_logit =
          open >= 0 && static_cast<size_t>(open) < logits.size() ? logits[open] : kNegInf;
      const bool any = inner_->Mask(logits);
      if (open >= 0 && static_cast<size_t>(open) < logits.size()) logits[open] = open_logit;
      return any || open_logit != kNegInf;
    }
    case Phase::kAnswer: {
      const int32_t open = tags_->open_id;
      if (open_masked_ && open >= 0 && static_cast<size_t>(open) < logits.size()) {
        logits[open] = kNegInf;
      }
      return inner_ == nullptr || inner_->Mask(logits);
    }
  }
  return true;
}

bool ReasoningGate::Accept(int32_t token) {
  switch (phase_) {
    case Phase::kReasoning:
      ++reasoning_tokens_;
      if (ClosedBy(token_text_(token))) {
        phase_ = Phase::kAnswer;
      } else if (budget_.has_value() && reasoning_tokens_ >= *budget_ &&
                 !tags_->close_ids.empty()) {
        phase_ = Phase::kClosing;
        closing_pos_ = 0;
      }
      return true;
    case Phase::kClosing:
      if (token != tags_->close_ids[closing_pos_]) return false;
      if (++closing_pos_ == tags_->close_ids.size()) phase_ = Phase::kAnswer;
      return true;
    case Phase::kStart: {
      if (token == tags_->open_id && tags_->open_id >= 0) {
        phase_ = Phase::kReasoning;
        text_.clear();
        if (budget_.has_value() && *budget_ <= 0) phase_ = Phase::kClosing;
        return true;
      }
      if (inner_ != nullptr) {
        phase_ = Phase::kAnswer;
        return inner_->Accept(token);
      }
      // Free: the block opens if the answer's text begins with the open tag (in pieces).
      text_.append(token_text_(token));
      const std::string_view start = TrimLeft(text_);
      if (start.size() >= tags_->open.size()) {
        if (start.starts_with(tags_->open)) {
          const std::string rest(start.substr(tags_->open.size()));
          text_.clear();
          phase_ = Phase::kReasoning;
          if (ClosedBy(rest)) phase_ = Phase::kAnswer;
        } else {
          phase_ = Phase::kAnswer;
        }
      } else if (!std::string_view(tags_->open).starts_with(start)) {
        phase_ = Phase::kAnswer;
      }
      return true;
    }
    case Phase::kAnswer:
      return inner_ == nullptr || inner_->Accept(token);
  }
  return true;
}

bool ReasoningGate::ClosedBy(std::string_view text) {
  text_.append(text);
  if (text_.find(tags_->close) != std::string::npos) {
    text_.clear();
    return true;
  }
  // Only a tail that could still begin the closing tag matters.
  const size_t keep = tags_->close.size();
  if (text_.size() > keep) text_.erase(0, text_.size() - keep);
  return false;
}

bool ReasoningGate::Complete() const {
  return phase_ == Phase::kAnswer && inner_ != nullptr && inner_->Complete();
}

}  // namespace textgen
