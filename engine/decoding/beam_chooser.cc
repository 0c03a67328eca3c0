#include "engine/decoding/beam_chooser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/decoding/sampler.h"
#include "engine/decoding/stream_assembler.h"
#include "engine/ops/softmax.h"
#include "engine/ops/threading.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

BeamSearchOptions SearchOptions(const Tokenizer& tokenizer, const DecodingOptions& options,
                                bool constrained) {
  BeamSearchOptions b = options.beam;
  b.max_new_tokens = options.max_new_tokens;
  b.eos_id = tokenizer.eos_id();
  b.eog_ids = tokenizer.eog_ids();
  b.ignore_eos = options.ignore_eos;
  b.drop_impossible = constrained;
  return b;
}

std::vector<int32_t> Sorted(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

BeamChooser::BeamChooser(const Tokenizer& tokenizer, const DecodingOptions& options, int vocab,
                         std::vector<int32_t> prompt, std::unique_ptr<TokenConstraint> constraint)
    : tok_(tokenizer),
      vocab_(vocab),
      prompt_(std::move(prompt)),
      repetition_penalty_(options.sampling.repetition_penalty),
      stops_(options.stop),
      shown_(Sorted(options.shown_special_tokens)),
      num_return_(options.beam.num_return_sequences),
      search_(SearchOptions(tokenizer, options, constraint != nullptr)) {
  for (const std::string& st : stops_) {
    if (st.empty()) continue;
    has_stops_ = true;
    stop_tail_bytes_ = std::max(stop_tail_bytes_, st.size() - 1);
  }
  // One running beam at the start: the prompt.
  if (constraint != nullptr) constraints_.push_back(std::move(constraint));
  logprobs_.resize(1);
  tails_.resize(has_stops_ ? 1 : 0);
}

absl::StatusOr<TokenChoice> BeamChooser::Choose(const float* logits) {
  TG_RETURN_IF_ERROR(ScoreRows(logits));
  const int n = search_.num_live();
  std::vector<const double*> ptrs(n);
  for (int i = 0; i < n; ++i) ptrs[i] = &rows_[static_cast<size_t>(i) * vocab_];
  TokenChoice choice;
  choice.next = search_.Step(ptrs, vocab_, Terminal());
  TG_RETURN_IF_ERROR(Follow(choice.next));
  if (search_.done()) {
    results_ = search_.Results();
    FinishReason reason = FinishReason::kLength;
    if (!results_.empty()) {
      std::string text;
      reason = HypothesisEnd(results_[0], &text).value_or(reason);
    }
    choice.end = reason;
  }
  return choice;
}

absl::Status BeamChooser::ScoreRows(const float* logits) {
  const int n = search_.num_live();
  rows_.resize(static_cast<size_t>(n) * vocab_);
  if (!constraints_.empty()) {
    // Each beam's own constraint, before the rows go to the threads (masks read shared state).
    masked_.resize(static_cast<size_t>(n) * vocab_);
    for (int i = 0; i < n; ++i) {
      const size_t off = static_cast<size_t>(i) * vocab_;
      TG_RETURN_IF_ERROR(
          ApplyConstraint(constraints_[i].get(), logits + off, vocab_, &masked_[off]).status());
    }
    logits = masked_.data();
  }
  const bool penalty = repetition_penalty_ != 1.0f;
  // Each beam's context for the penalty, here: running_ids materialises lazily and is not safe
  // to call concurrently.
  std::vector<std::vector<int32_t>> contexts(penalty ? n : 0);
  for (size_t i = 0; i < contexts.size(); ++i) {
    contexts[i] = prompt_;
    const std::vector<int32_t>& ids = search_.running_ids(static_cast<int>(i));
    contexts[i].insert(contexts[i].end(), ids.begin(), ids.end());
  }
  if (penalty) processed_.resize(static_cast<size_t>(n) * vocab_);
  // Each beam's row on its own, across the compute threads: the log-softmax of 4 vocabulary
  // rows was the largest part of a beam step left on one thread (the other spun meanwhile).
  ops::ParallelForEach(n, ops::NumThreads(), [&](int64_t i) {
    const size_t off = static_cast<size_t>(i) * vocab_;
    const float* row = logits + off;
    if (penalty) {
      float* p = &processed_[off];
      std::memcpy(p, row, vocab_ * sizeof(float));
      ApplyRepetitionPenalty(repetition_penalty_, contexts[i], absl::MakeSpan(p, vocab_));
      row = p;
    }
    ops::LogSoftmax(row, vocab_, &rows_[off]);
  });
  return absl::OkStatus();
}

TerminalFn BeamChooser::Terminal() const {
  const bool constrained = !constraints_.empty();
  if (!has_stops_ && !constrained) return nullptr;
  // A candidate whose constraint is complete ends its hypothesis, as a stop string does.
  return [this, constrained](int beam, int32_t token) {
    if (has_stops_ && EndsInStop(beam, token)) return true;
    if (!constrained) return false;
    std::unique_ptr<TokenConstraint> next = constraints_[beam]->Clone();
    return next->Accept(token) && next->Complete();
  };
}

bool BeamChooser::EndsInStop(int beam, int32_t token) const {
  // Running beams never contain a stop (the candidate that completed one was terminal), so any
  // match here ends in the new token and starts within the kept tail.
  std::string text = tails_[static_cast<size_t>(beam)];
  text.append(tok_.TokenBytes(token));
  for (const std::string& st : stops_) {
    if (!st.empty() && text.find(st) != std::string::npos) return true;
  }
  return false;
}

absl::Status BeamChooser::Follow(const std::vector<BeamChoice>& choices) {
  const bool constrained = !constraints_.empty();
  std::vector<std::vector<double>> logprobs(choices.size());
  std::vector<std::string> tails(has_stops_ ? choices.size() : 0);
  std::vector<std::unique_ptr<TokenConstraint>> constraints(constrained ? choices.size() : 0);
  for (size_t j = 0; j < choices.size(); ++j) {
    const int p = choices[j].parent;
    const int32_t token = choices[j].token;
    if (has_stops_) {
      std::string& t = tails[j];
      t = tails_[p];
      t.append(tok_.TokenBytes(token));
      if (t.size() > stop_tail_bytes_) t.erase(0, t.size() - stop_tail_bytes_);
    }
    logprobs[j] = logprobs_[p];
    logprobs[j].push_back(rows_[static_cast<size_t>(p) * vocab_ + token]);
    if (constrained) {
      constraints[j] = constraints_[p]->Clone();
      if (!constraints[j]->Accept(token)) {
        return absl::InternalError(absl::StrCat("the output constraint refused token ", token,
                                                ", which its mask allowed"));
      }
    }
  }
  logprobs_ = std::move(logprobs);
  tails_ = std::move(tails);
  constraints_ = std::move(constraints);
  return absl::OkStatus();
}

std::vector<GeneratedToken> BeamChooser::TakeCertain() {
  // No running beam left: the search is over, and End gives the rest of the best hypothesis
  // with its own logprobs.
  if (logprobs_.empty()) return {};
  // Only the growth: the certain prefix never shrinks (see BeamSearch::CertainPrefix), and the
  // running beams share it, so beam 0's logprobs are its logprobs.
  const std::vector<int32_t> fresh = search_.CertainPrefixFrom(static_cast<int>(certain_));
  std::vector<GeneratedToken> out;
  for (size_t k = 0; k < fresh.size(); ++k) {
    out.push_back(GeneratedToken{fresh[k], std::string(), logprobs_[0][certain_ + k], {}});
  }
  certain_ += fresh.size();
  return out;
}

std::vector<GeneratedToken> BeamChooser::End() {
  if (results_.empty()) {
    for (size_t i = 0; i < logprobs_.size(); ++i) {
      BeamHypothesis h;
      h.ids = search_.running_ids(static_cast<int>(i));
      h.logprobs = logprobs_[i];
      h.cum_logprob = search_.running_cum_logprob(static_cast<int>(i));
      h.score = h.cum_logprob;
      results_.push_back(std::move(h));
    }
    std::stable_sort(results_.begin(), results_.end(),
                     [](const auto& a, const auto& b) { return a.score > b.score; });
  }
  std::vector<GeneratedToken> rest;
  if (results_.empty()) return rest;
  // The rest of the best hypothesis beyond what was certain (and taken) already.
  const BeamHypothesis& best = results_[0];
  for (size_t k = certain_; k < best.ids.size(); ++k) {
    rest.push_back(GeneratedToken{best.ids[k], std::string(), best.logprobs[k], {}});
  }
  certain_ = best.ids.size();
  return rest;
}

std::vector<int32_t> BeamChooser::answer_ids() const {
  return results_.empty() ? std::vector<int32_t>() : results_[0].ids;
}

std::optional<FinishReason> BeamChooser::HypothesisEnd(const BeamHypothesis& b,
                                                       std::string* text) const {
  size_t stop_at = std::string::npos;
  *text = AnswerText(tok_, shown_, stops_, b.ids, &stop_at);
  if (b.eos) return FinishReason::kEos;
  if (!b.stopped) return std::nullopt;
  // Terminal: a stop string, or its constraint completed (see Terminal()).
  if (stop_at == std::string::npos) return FinishReason::kConstraintComplete;
  text->resize(stop_at);
  return FinishReason::kStopSequence;
}

std::vector<Hypothesis> BeamChooser::Results(FinishReason finish, std::string /*streamed*/) {
  const int n = std::min<int>(num_return_, static_cast<int>(results_.size()));
  std::vector<Hypothesis> out;
  for (int i = 0; i < n; ++i) {
    BeamHypothesis& b = results_[i];
    Hypothesis h;
    const std::optional<FinishReason> end = HypothesisEnd(b, &h.text);
    h.ids = std::move(b.ids);
    h.logprobs = std::move(b.logprobs);
    h.score = b.score;
    h.cum_logprob = b.cum_logprob;
    // A hypothesis that neither hit EOS nor stopped ran to the length limit, unless the request
    // ended early (cancelled / context full), which then applies to it.
    if (end.has_value()) {
      h.finish_reason = *end;
    } else if (finish == FinishReason::kEos || finish == FinishReason::kStopSequence ||
               finish == FinishReason::kConstraintComplete) {
      h.finish_reason = FinishReason::kLength;
    } else {
      h.finish_reason = finish;
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace textgen
