#include "engine/decoding/generation.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/ops/softmax.h"
#include "engine/ops/threading.h"
#include "engine/tokenizer/unicode.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<int32_t> SortedIds(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

int PrefixShareableBlocks(const DecodingOptions& options, int block_size) {
  if (!options.use_cache) return 0;
  if (options.context_overflow == ContextOverflow::kSlide) {
    return (options.n_keep + block_size - 1) / block_size;
  }
  return std::numeric_limits<int>::max();
}

Generation::Generation(CausalLm& model, const Tokenizer& tokenizer, KvCache& cache,
                       std::vector<int32_t> prompt, const DecodingOptions& options, StreamSink sink)
    : model_(model),
      tok_(tokenizer),
      cache_(cache),
      prompt_(std::move(prompt)),
      options_(options),
      sink_(std::move(sink)),
      n_vocab_(model.config().n_vocab),
      n_ctx_(model.config().n_ctx),
      block_size_(cache.block_size()),
      keep_blocks_((options.n_keep + cache.block_size() - 1) / cache.block_size()),
      detok_(tokenizer, SortedIds(options.shown_special_tokens)),
      stop_(options.stop),
      beam_detok_(tokenizer, SortedIds(options.shown_special_tokens)) {}

Generation::~Generation() {
  FreeAll();
  cache_.Free(kept_);
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Create(
    CausalLm& model, const Tokenizer& tokenizer, KvCache& cache, std::vector<int32_t> prompt,
    const DecodingOptions& options, StreamSink sink, BlockTable* cached) {
  const ModelConfig& c = model.config();
  TG_RETURN_IF_ERROR(ValidateDecodingOptions(options, c.n_ctx, static_cast<int>(prompt.size())));
  for (int32_t id : prompt) {
    if (id < 0 || id >= c.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_ids: token id ", id, " is outside the vocabulary [0, ", c.n_vocab, ")"));
    }
  }
  if (options.context_overflow == ContextOverflow::kSlide && 4 * cache.block_size() > c.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context_overflow slide needs KV blocks of at most a quarter of the context (block size ",
        cache.block_size(), ", context ", c.n_ctx, ")"));
  }
  auto g = std::unique_ptr<Generation>(
      new Generation(model, tokenizer, cache, std::move(prompt), options, std::move(sink)));
  g->start_ = Clock::now();
  g->stats_.prompt_tokens = static_cast<int>(g->prompt_.size());
  g->logprobs_.resize(c.n_vocab);
  g->processed_.resize(c.n_vocab);
  if (options.method == DecodingMethod::kBeam) {
    BeamSearchOptions b = options.beam;
    b.max_new_tokens = options.max_new_tokens;
    b.eos_id = tokenizer.eos_id();
    b.eog_ids = tokenizer.eog_ids();
    b.ignore_eos = options.ignore_eos;
    b.drop_impossible = static_cast<bool>(options.constraint);
    g->beam_.emplace(b);
    g->beam_logprobs_.resize(1);
    for (const std::string& st : options.stop) {
      if (st.empty()) continue;
      g->has_stops_ = true;
      g->stop_tail_bytes_ = std::max(g->stop_tail_bytes_, st.size() - 1);
    }
    g->beam_tails_.resize(1);
  } else if (options.method == DecodingMethod::kSample && options.sampling.temperature > 0) {
    g->sampler_.emplace(options.sampling);
  }
  g->context_ = g->prompt_;
  g->seqs_.resize(1);
  g->seqs_[0].feed = g->prompt_;
  if (options.constraint) {
    g->seqs_[0].constraint = options.constraint();
    if (g->seqs_[0].constraint == nullptr) {
      return absl::InternalError("the output constraint could not be created");
    }
    g->masked_.resize(c.n_vocab);
  }
  if (cached != nullptr && !cached->empty()) {
    // At least the last prompt token must run to produce logits.
    const int reusable = std::min<int>(cached->num_tokens, static_cast<int>(g->prompt_.size()) - 1);
    if (options.use_cache && reusable > 0) {
      if (reusable < cached->num_tokens) cache.Truncate(*cached, reusable);
      g->seqs_[0].feed.assign(g->prompt_.begin() + reusable, g->prompt_.end());
      g->seqs_[0].table = std::move(*cached);
      g->stats_.cached_tokens = reusable;
    } else {
      cache.Free(*cached);
    }
  }
  return g;
}

std::vector<int32_t> Generation::WindowTokens(const std::vector<int32_t>& gen) const {
  std::vector<int32_t> full(prompt_);
  full.insert(full.end(), gen.begin(), gen.end());
  if (dropped_blocks_ == 0) return full;
  const size_t keep = static_cast<size_t>(keep_blocks_) * block_size_;
  const size_t drop = static_cast<size_t>(dropped_blocks_) * block_size_;
  std::vector<int32_t> w(full.begin(), full.begin() + keep);
  w.insert(w.end(), full.begin() + keep + drop, full.end());
  return w;
}

absl::Status Generation::MaybeShift() {
  const int64_t generated = beam_ ? beam_->steps() : static_cast<int64_t>(generated_.size());
  // Tokens in context once this step's feed has run.
  const int64_t ctx_after =
      static_cast<int64_t>(prompt_.size()) + generated - int64_t{dropped_blocks_} * block_size_;
  if (options_.context_overflow == ContextOverflow::kError) {
    // The prompt and the answer together hold at most the context: with ctx_after tokens
    // already, the next choice would be one more than it allows. Only reached with
    // stop_at_context_limit (else max_new_tokens was validated against the context).
    if (ctx_after >= n_ctx_) Finish(FinishReason::kContextFull);
    return absl::OkStatus();
  }
  if (ctx_after <= n_ctx_) return absl::OkStatus();
  const int drop = static_cast<int>((ctx_after - n_ctx_ + block_size_ - 1) / block_size_);
  if (options_.use_cache) {
    std::vector<BlockTable*> tables;
    for (Seq& s : seqs_) tables.push_back(&s.table);
    TG_RETURN_IF_ERROR(model_.ShiftContext(cache_, tables, keep_blocks_, drop));
  }
  dropped_blocks_ += drop;
  ++stats_.context_shifts;
  return absl::OkStatus();
}

absl::Status Generation::PrepareStep(std::vector<ForwardSeq>* seqs, int max_prompt_tokens) {
  if (done_) return absl::FailedPreconditionError("generation already finished");
  if (cancelled_.load()) {
    Finish(FinishReason::kCancelled);  // a no-op when only the session catch-up was left
    catch_up_.clear();
    done_ = true;
    return absl::OkStatus();
  }
  if (!finished_ && !step_open_) {
    // The passes towards the next choice begin: slide the window first if it is full; without
    // the cache every sequence is recomputed from scratch.
    TG_RETURN_IF_ERROR(MaybeShift());
    if (!finished_ && !options_.use_cache) {
      for (size_t i = 0; i < seqs_.size(); ++i) {
        Seq& s = seqs_[i];
        cache_.Free(s.table);
        s.feed = WindowTokens(beam_ ? beam_->running_ids(static_cast<int>(i)) : generated_);
        s.fed = 0;
      }
    }
    step_open_ = true;
  }
  int budget = prefilling() ? std::max(0, max_prompt_tokens) : kUnlimitedTokens;
  if (finished_) {
    PrepareCatchUp(seqs, budget);
    return absl::OkStatus();
  }
  for (Seq& s : seqs_) s.pending = 0;
  for (Seq& s : seqs_) {
    const size_t left = s.feed.size() - s.fed;
    if (left == 0) continue;  // ran in an earlier pass towards this choice (cache off, beams)
    const size_t take = std::min<size_t>(left, static_cast<size_t>(budget));
    if (take == 0) break;
    budget -= static_cast<int>(take);
    s.pending = take;
    ForwardSeq fs;
    fs.tokens = absl::MakeConstSpan(s.feed).subspan(s.fed, take);
    fs.table = &s.table;
    fs.pos0 = s.table.num_tokens;  // positions equal slots, also after a shift
    fs.logits = s.fed + take == s.feed.size();
    seqs->push_back(fs);
  }
  return absl::OkStatus();
}

void Generation::PrepareCatchUp(std::vector<ForwardSeq>* seqs, int max_tokens) {
  catch_up_pending_ =
      std::min<size_t>(catch_up_.size() - catch_up_fed_, static_cast<size_t>(max_tokens));
  if (catch_up_pending_ == 0) return;
  ForwardSeq fs;
  fs.tokens = absl::MakeConstSpan(catch_up_).subspan(catch_up_fed_, catch_up_pending_);
  fs.table = &kept_;
  fs.pos0 = kept_.num_tokens;
  fs.logits = false;
  seqs->push_back(fs);
}

bool Generation::prefilling() const {
  return !done_ && (finished_ || !prompt_done_ || !options_.use_cache);
}

int Generation::pending_prompt_tokens() const {
  if (!prefilling()) return 0;
  if (finished_) return static_cast<int>(catch_up_.size() - catch_up_fed_);
  size_t left = 0;
  for (const Seq& s : seqs_) left += s.feed.size() - s.fed;
  return static_cast<int>(left);
}

absl::Status Generation::ConsumeStep(const float* logits) {
  if (done_) return absl::FailedPreconditionError("generation already finished");
  if (finished_) {
    catch_up_fed_ += catch_up_pending_;
    catch_up_pending_ = 0;
    if (catch_up_fed_ == catch_up_.size()) {
      cache_.PublishTail(kept_, kept_tokens_, PrefixShareableBlocks(options_, block_size_));
      catch_up_.clear();
      done_ = true;
    }
    return absl::OkStatus();
  }
  // A sequence's logits row comes with the pass that runs the last token of its feed. When
  // every sequence's feed ended in this pass the rows are in order already; otherwise (cache
  // off with beams over several passes) they are gathered in step_logits_.
  bool direct = true;
  for (const Seq& s : seqs_) direct = direct && s.pending > 0 && s.fed + s.pending == s.feed.size();
  if (!direct) step_logits_.resize(seqs_.size() * n_vocab_);
  bool complete = true;
  bool filled_block = false;  // some sequence completed a block in this pass
  size_t row = 0;
  for (size_t i = 0; i < seqs_.size(); ++i) {
    Seq& s = seqs_[i];
    if (s.pending > 0) {
      const int before = s.table.num_tokens - static_cast<int>(s.pending);
      filled_block = filled_block || before / block_size_ < s.table.num_tokens / block_size_;
      s.fed += s.pending;
      s.pending = 0;
      if (s.fed == s.feed.size()) {
        if (!direct) {
          std::memcpy(&step_logits_[i * n_vocab_], logits + row * n_vocab_,
                      n_vocab_ * sizeof(float));
        }
        ++row;
      }
    }
    complete = complete && s.fed == s.feed.size();
  }
  // Before the choice below forks or drops sequences: their tables hold exactly what ran.
  if (filled_block) PublishBlocks();
  if (!complete) {
    TrackBlocks();
    return absl::OkStatus();  // a prompt chunk: nothing to choose yet
  }
  step_open_ = false;
  prompt_done_ = true;
  const float* rows = direct ? logits : step_logits_.data();
  TG_RETURN_IF_ERROR(beam_ ? ConsumeBeams(rows) : ConsumeSingle(rows));
  if (stats_.time_to_first_token_s == 0) stats_.time_to_first_token_s = SecondsSince(start_);
  TrackBlocks();
  return absl::OkStatus();
}

absl::StatusOr<const float*> Generation::Constrained(const Seq& s, const float* row,
                                                     float* out) const {
  if (s.constraint == nullptr) return row;
  std::memcpy(out, row, n_vocab_ * sizeof(float));
  if (!s.constraint->Mask(absl::MakeSpan(out, n_vocab_))) {
    return absl::FailedPreconditionError(
        "the output constraint allows no token of this model's vocabulary here (a grammar "
        "needing text the vocabulary cannot spell?)");
  }
  return out;
}

absl::Status Generation::ConsumeSingle(const float* raw) {
  // Logprobs report the model's own distribution; the choice is made among allowed tokens.
  ops::LogSoftmax(raw, n_vocab_, logprobs_.data());
  TG_ASSIGN_OR_RETURN(const float* logits, Constrained(seqs_[0], raw, masked_.data()));
  int32_t id;
  if (sampler_) {
    id = sampler_->Sample(absl::MakeConstSpan(logits, n_vocab_), context_);
  } else {
    std::memcpy(processed_.data(), logits, n_vocab_ * sizeof(float));
    if (options_.sampling.repetition_penalty != 1.0f) {
      ApplyRepetitionPenalty(options_.sampling.repetition_penalty, context_,
                             absl::MakeSpan(processed_));
    }
    id = static_cast<int32_t>(ops::ArgMax(processed_.data(), n_vocab_));
  }
  std::vector<TokenLogprob> top;
  if (options_.top_logprobs > 0) top = TopLogprobs(logprobs_, options_.top_logprobs);
  TokenConstraint* constraint = seqs_[0].constraint.get();
  if (constraint != nullptr && !constraint->Accept(id)) {
    return absl::InternalError(
        absl::StrCat("the output constraint refused token ", id, ", which its own mask allowed"));
  }
  EmitSingle(id, logprobs_[id], std::move(top));

  if (stop_.stopped()) {
    Finish(FinishReason::kStopSequence);
  } else if ((id == tok_.eos_id() || tok_.IsEog(id)) && !options_.ignore_eos) {
    Finish(FinishReason::kEos);
  } else if (constraint != nullptr && constraint->Complete()) {
    Finish(FinishReason::kConstraintComplete);
  } else if (static_cast<int>(generated_.size()) >= options_.max_new_tokens) {
    Finish(FinishReason::kLength);
  } else {
    seqs_[0].feed.assign(1, id);
    seqs_[0].fed = 0;
  }
  return absl::OkStatus();
}

void Generation::EmitSingle(int32_t id, double logprob, std::vector<TokenLogprob> top) {
  generated_.push_back(id);
  context_.push_back(id);
  generated_logprobs_.push_back(logprob);
  GeneratedToken t{id, detok_.Add(id), logprob, std::move(top)};
  StreamDelta delta;
  delta.text = stop_.stopped() ? std::string() : stop_.Push(t.text);
  text_ += delta.text;
  tokens_.push_back(t);
  delta.tokens.push_back(std::move(t));
  if (sink_) sink_(delta);
}

absl::Status Generation::ConsumeBeams(const float* logits) {
  const int n = static_cast<int>(seqs_.size());
  rows_.resize(static_cast<size_t>(n) * n_vocab_);
  if (seqs_[0].constraint != nullptr) {
    // Each beam's own constraint, before the rows go to the threads (masks read shared state).
    beam_masked_.resize(static_cast<size_t>(n) * n_vocab_);
    for (int i = 0; i < n; ++i) {
      const size_t off = static_cast<size_t>(i) * n_vocab_;
      TG_RETURN_IF_ERROR(Constrained(seqs_[i], logits + off, &beam_masked_[off]).status());
    }
    logits = beam_masked_.data();
  }
  const bool penalty = options_.sampling.repetition_penalty != 1.0f;
  // Each beam's context for the penalty, here: running_ids materialises lazily and is not safe
  // to call concurrently.
  std::vector<std::vector<int32_t>> contexts(penalty ? n : 0);
  for (size_t i = 0; i < contexts.size(); ++i) {
    contexts[i] = prompt_;
    const auto& ids = beam_->running_ids(static_cast<int>(i));
    contexts[i].insert(contexts[i].end(), ids.begin(), ids.end());
  }
  if (penalty) beam_processed_.resize(static_cast<size_t>(n) * n_vocab_);
  // Each beam's row on its own, across the compute threads: the log-softmax of 4 vocabulary
  // rows was the largest part of a beam step left on one thread (the other spun meanwhile).
  ops::ParallelForEach(n, ops::NumThreads(), [&](int64_t i) {
    const size_t off = static_cast<size_t>(i) * n_vocab_;
    const float* row = logits + off;
    if (penalty) {
      float* p = &beam_processed_[off];
      std::memcpy(p, row, n_vocab_ * sizeof(float));
      ApplyRepetitionPenalty(options_.sampling.repetition_penalty, contexts[i],
                             absl::MakeSpan(p, n_vocab_));
      row = p;
    }
    ops::LogSoftmax(row, n_vocab_, &rows_[off]);
  });
  std::vector<const double*> ptrs(n);
  for (int i = 0; i < n; ++i) ptrs[i] = &rows_[static_cast<size_t>(i) * n_vocab_];
  TerminalFn terminal;
  const bool constrained = seqs_[0].constraint != nullptr;
  if (has_stops_ || constrained) {
    // A candidate whose constraint is complete ends its hypothesis, as a stop string does.
    terminal = [this, constrained](int beam, int32_t token) {
      if (has_stops_ && BeamEndsInStop(beam, token)) return true;
      if (!constrained) return false;
      std::unique_ptr<TokenConstraint> next = seqs_[beam].constraint->Clone();
      return next->Accept(token) && next->Complete();
    };
  }
  std::vector<BeamChoice> choices = beam_->Step(ptrs, n_vocab_, terminal);
  if (choices.empty() && keep_cache_ && !seqs_.empty() && dropped_blocks_ == 0) {
    // The search is over and every beam is about to be dropped: keep one table for the
    // session's next turn (its prompt part is common to all beams; see Finish).
    kept_ = std::move(seqs_[0].table);
    const int prompt_len = static_cast<int>(prompt_.size());
    if (kept_.num_tokens > prompt_len) cache_.Truncate(kept_, prompt_len);
  }

  // Children continue their parent's cache: the last child takes the parent's table, earlier
  // ones fork it (shared blocks, copy-on-write later); parents without children are freed.
  std::vector<int> remaining(n, 0);
  for (const BeamChoice& c : choices) ++remaining[c.parent];
  std::vector<Seq> next(choices.size());
  std::vector<std::vector<double>> next_lp(choices.size());
  std::vector<std::string> next_tails(has_stops_ ? choices.size() : 0);
  for (size_t j = 0; j < choices.size(); ++j) {
    const int p = choices[j].parent;
    if (has_stops_) {
      std::string& t = next_tails[j];
      t = beam_tails_[p];
      t.append(tok_.TokenBytes(choices[j].token));
      if (t.size() > stop_tail_bytes_) t.erase(0, t.size() - stop_tail_bytes_);
    }
    next_lp[j] = beam_logprobs_[p];
    next_lp[j].push_back(rows_[static_cast<size_t>(p) * n_vocab_ + choices[j].token]);
    if (--remaining[p] > 0) {
      next[j].table = cache_.Fork(seqs_[p].table);
    } else {
      next[j].table = std::move(seqs_[p].table);
    }
    next[j].feed.assign(1, choices[j].token);
    if (constrained) {
      const TokenConstraint& parent = *seqs_[p].constraint;
      next[j].constraint = parent.Clone();
      if (!next[j].constraint->Accept(choices[j].token)) {
        return absl::InternalError(absl::StrCat("the output constraint refused token ",
                                                choices[j].token, ", which its mask allowed"));
      }
    }
  }
  for (Seq& s : seqs_) cache_.Free(s.table);  // parents with no child (moved ones are empty)
  seqs_ = std::move(next);
  beam_logprobs_ = std::move(next_lp);
  beam_tails_ = std::move(next_tails);
  StreamCertainPrefix();
  if (beam_->done()) {
    beam_results_ = beam_->Results();
    FinishReason reason = FinishReason::kLength;
    if (!beam_results_.empty() && beam_results_[0].eos) reason = FinishReason::kEos;
    if (!beam_results_.empty()) reason = BeamEnd(beam_results_[0]).value_or(reason);
    Finish(reason);
  }
  return absl::OkStatus();
}

bool Generation::BeamEndsInStop(int beam, int32_t token) const {
  // Running beams never contain a stop (the candidate that completed one was terminal), so any
  // match here ends in the new token and starts within the kept tail.
  std::string text = beam_tails_[static_cast<size_t>(beam)];
  text.append(tok_.TokenBytes(token));
  for (const std::string& st : options_.stop) {
    if (!st.empty() && text.find(st) != std::string::npos) return true;
  }
  return false;
}

std::optional<FinishReason> Generation::BeamEnd(const BeamHypothesis& b) const {
  if (b.eos) return FinishReason::kEos;
  if (!b.stopped) return std::nullopt;
  // Terminal: a stop string, or its constraint completed (ConsumeBeams' terminal rule).
  const std::string text = DecodeOutput(b.ids);
  return has_stops_ && CutAtStop(text).size() < text.size() ? FinishReason::kStopSequence
                                                            : FinishReason::kConstraintComplete;
}

std::string Generation::DecodeOutput(const std::vector<int32_t>& ids) const {
  IncrementalDetokenizer d(tok_, SortedIds(options_.shown_special_tokens));
  std::string text;
  for (int32_t id : ids) text += d.Add(id);
  return text + d.Flush();
}

std::string Generation::CutAtStop(const std::string& text) const {
  // The same matcher as the stream, so a stopped best hypothesis' text equals what was streamed.
  StopMatcher m(options_.stop);
  std::string out = m.Push(text);
  if (!m.stopped()) out += m.Flush();
  return out;
}

void Generation::StreamCertainPrefix() {
  // Only the growth: the certain prefix never shrinks (see BeamSearch::CertainPrefix).
  std::vector<int32_t> fresh = beam_->CertainPrefixFrom(static_cast<int>(streamed_));
  if (fresh.empty() || beam_logprobs_.empty()) return;
  StreamDelta delta;
  std::string text;
  for (size_t k = 0; k < fresh.size(); ++k) {
    GeneratedToken t{fresh[k], beam_detok_.Add(fresh[k]), beam_logprobs_[0][streamed_ + k], {}};
    text += t.text;
    beam_tokens_.push_back(t);
    delta.tokens.push_back(std::move(t));
  }
  streamed_ += fresh.size();
  // Text that may still turn into a stop string is held back, so the stream never shows stop
  // text even though the certain prefix can end in the best hypothesis' stop-completing token.
  if (!stop_.stopped()) delta.text = stop_.Push(text);
  if (sink_) sink_(delta);
}

void Generation::PublishBlocks() {
  const int limit = PrefixShareableBlocks(options_, block_size_);
  if (limit == 0 || !cache_.prefix_cache_enabled()) return;
  for (size_t i = 0; i < seqs_.size(); ++i) {
    const std::vector<int32_t>& gen = beam_ ? beam_->running_ids(static_cast<int>(i)) : generated_;
    publish_scratch_.assign(prompt_.begin(), prompt_.end());
    publish_scratch_.insert(publish_scratch_.end(), gen.begin(), gen.end());
    cache_.PublishPrefix(seqs_[i].table, publish_scratch_, limit);
  }
}

void Generation::PublishTail() {
  const int limit = PrefixShareableBlocks(options_, block_size_);
  // Beams: a running beam's table need not line up with its ids once the search has ended.
  if (limit == 0 || beam_ || dropped_blocks_ != 0 || seqs_.size() != 1) return;
  if (!cache_.prefix_cache_enabled()) return;
  publish_scratch_.assign(prompt_.begin(), prompt_.end());
  publish_scratch_.insert(publish_scratch_.end(), generated_.begin(), generated_.end());
  cache_.PublishTail(seqs_[0].table, publish_scratch_, limit);
}

void Generation::TrackBlocks() {
  stats_.peak_kv_blocks = std::max(stats_.peak_kv_blocks, blocks_in_use());
}

int Generation::blocks_in_use() const {
  absl::flat_hash_set<int32_t> blocks;
  for (const Seq& s : seqs_) blocks.insert(s.table.blocks.begin(), s.table.blocks.end());
  return static_cast<int>(blocks.size());
}

void Generation::Finish(FinishReason reason) {
  if (finished_) return;
  finished_ = true;
  finish_ = reason;
  StreamDelta delta;
  if (beam_) {
    if (beam_results_.empty()) {
      // Ended early (cancelled / context full): the running beams as they stand, best first.
      for (size_t i = 0; i < seqs_.size(); ++i) {
        BeamHypothesis h;
        h.ids = beam_->running_ids(static_cast<int>(i));
        h.logprobs = beam_logprobs_[i];
        h.cum_logprob = beam_->running_cum_logprob(static_cast<int>(i));
        h.score = h.cum_logprob;
        beam_results_.push_back(std::move(h));
      }
      std::stable_sort(beam_results_.begin(), beam_results_.end(),
                       [](const auto& a, const auto& b) { return a.score > b.score; });
    }
    std::string text;
    if (!beam_results_.empty()) {
      // The rest of the best hypothesis beyond what was certain (and streamed) already.
      const BeamHypothesis& best = beam_results_[0];
      for (size_t k = streamed_; k < best.ids.size(); ++k) {
        GeneratedToken t{best.ids[k], beam_detok_.Add(best.ids[k]), best.logprobs[k], {}};
        text += t.text;
        beam_tokens_.push_back(t);
        delta.tokens.push_back(std::move(t));
      }
      streamed_ = best.ids.size();
    }
    text += beam_detok_.Flush();
    if (!stop_.stopped()) {
      delta.text = stop_.Push(text);
      delta.text += stop_.Flush();  // "" once stopped
    }
  } else if (!stop_.stopped()) {
    delta.text = stop_.Push(detok_.Flush());
    delta.text += stop_.Flush();
    text_ += delta.text;
  }
  if (sink_ && (!delta.text.empty() || !delta.tokens.empty())) sink_(delta);
  stats_.total_s = SecondsSince(start_);
  // Every slot of a finished sequence holds its final K/V (a cancel only comes between
  // passes, but an abort after a failed pass may not), so its tail can serve a request that
  // resends this conversation.
  if (reason != FinishReason::kCancelled) PublishTail();
  // A slid window no longer lines up with the conversation's tokens: nothing to keep then.
  if (keep_cache_ && kept_.empty() && dropped_blocks_ == 0 && !seqs_.empty() &&
      !seqs_[0].table.empty()) {
    kept_ = std::move(seqs_[0].table);
    const int prompt_len = static_cast<int>(prompt_.size());
    // A running beam's history need not be the best hypothesis; the prompt is common to all.
    if (beam_ && kept_.num_tokens > prompt_len) cache_.Truncate(kept_, prompt_len);
  }
  FreeAll();
  if (keep_cache_ && reason != FinishReason::kCancelled) PlanCatchUp();
  done_ = catch_up_.empty();
}

void Generation::PlanCatchUp() {
  if (kept_.empty()) return;
  std::vector<int32_t> conversation(prompt_);
  if (!beam_) {
    conversation.insert(conversation.end(), generated_.begin(), generated_.end());
  } else if (!beam_results_.empty()) {
    const std::vector<int32_t>& best = beam_results_[0].ids;
    conversation.insert(conversation.end(), best.begin(), best.end());
  }
  // A conversation past the context cannot be cached whole; the next turn recomputes.
  const size_t have = static_cast<size_t>(kept_.num_tokens);
  if (have >= conversation.size() || conversation.size() > static_cast<size_t>(n_ctx_)) return;
  catch_up_.assign(conversation.begin() + have, conversation.end());
  kept_tokens_ = std::move(conversation);
  catch_up_fed_ = 0;
  catch_up_pending_ = 0;
}

void Generation::Abort() {
  Finish(FinishReason::kCancelled);
  catch_up_.clear();
  done_ = true;
}

void Generation::FreeAll() {
  for (Seq& s : seqs_) cache_.Free(s.table);
}

GenerationResult Generation::TakeResult() {
  GenerationResult r;
  r.finish_reason = finish_;
  if (beam_) {
    const int n =
        std::min<int>(options_.beam.num_return_sequences, static_cast<int>(beam_results_.size()));
    for (int i = 0; i < n; ++i) {
      BeamHypothesis& b = beam_results_[i];
      Hypothesis h;
      const std::optional<FinishReason> end = BeamEnd(b);
      h.text = DecodeOutput(b.ids);
      if (end == FinishReason::kStopSequence) h.text = CutAtStop(h.text);
      h.ids = std::move(b.ids);
      h.logprobs = std::move(b.logprobs);
      h.score = b.score;
      h.cum_logprob = b.cum_logprob;
      // A hypothesis that neither hit EOS nor stopped ran to the length limit, unless the
      // request ended early (cancelled / context full), which then applies to it.
      if (end.has_value()) {
        h.finish_reason = *end;
      } else if (finish_ == FinishReason::kEos || finish_ == FinishReason::kStopSequence ||
                 finish_ == FinishReason::kConstraintComplete) {
        h.finish_reason = FinishReason::kLength;
      } else {
        h.finish_reason = finish_;
      }
      r.hypotheses.push_back(std::move(h));
    }
    r.tokens = std::move(beam_tokens_);
  } else {
    Hypothesis h;
    h.ids = generated_;
    h.logprobs = generated_logprobs_;
    h.text = text_;
    for (double lp : generated_logprobs_) h.cum_logprob += lp;
    h.score = h.cum_logprob;
    h.finish_reason = finish_;
    r.hypotheses.push_back(std::move(h));
    r.tokens = std::move(tokens_);
  }
  stats_.generated_tokens = r.hypotheses.empty() ? 0 : static_cast<int>(r.hypotheses[0].ids.size());
  r.stats = stats_;
  return r;
}

absl::StatusOr<GenerationResult> Generate(CausalLm& model, const Tokenizer& tokenizer,
                                          KvCache& cache, std::vector<int32_t> prompt,
                                          const DecodingOptions& options, StreamSink sink,
                                          int max_step_tokens) {
  if (max_step_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_step_tokens must be >= 1, got ", max_step_tokens));
  }
  TG_ASSIGN_OR_RETURN(auto g, Generation::Create(model, tokenizer, cache, std::move(prompt),
                                                 options, std::move(sink)));
  std::vector<ForwardSeq> seqs;
  std::vector<float> logits;
  while (!g->done()) {
    seqs.clear();
    TG_RETURN_IF_ERROR(g->PrepareStep(&seqs, max_step_tokens));
    if (g->done()) break;
    if (seqs.empty()) return absl::InternalError("generation: a step prepared no work");
    absl::Status st = model.Forward(cache, absl::MakeSpan(seqs), &logits);
    if (!st.ok()) {
      g->Abort();
      return st;
    }
    TG_RETURN_IF_ERROR(g->ConsumeStep(logits.data()));
  }
  return g->TakeResult();
}

}  // namespace textgen
