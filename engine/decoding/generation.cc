#include "engine/decoding/generation.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/decoding/beam_chooser.h"
#include "engine/decoding/single_chooser.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
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
      cache_(cache),
      prompt_(std::move(prompt)),
      options_(options),
      beams_(options.method == DecodingMethod::kBeam),
      n_vocab_(model.config().n_vocab),
      n_ctx_(model.config().n_ctx),
      block_size_(cache.block_size()),
      keep_blocks_((options.n_keep + cache.block_size() - 1) / cache.block_size()),
      stream_(tokenizer, options.shown_special_tokens, options.stop, std::move(sink)) {}

Generation::~Generation() {
  FreeAll();
  kept_.Free(cache_);
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
  std::unique_ptr<TokenConstraint> constraint;
  if (options.constraint) {
    constraint = options.constraint();
    if (constraint == nullptr) {
      return absl::InternalError("the output constraint could not be created");
    }
  }
  auto g = std::unique_ptr<Generation>(
      new Generation(model, tokenizer, cache, prompt, options, std::move(sink)));
  g->start_ = Clock::now();
  g->stats_.prompt_tokens = static_cast<int>(prompt.size());
  if (g->beams_) {
    g->chooser_ =
        std::make_unique<BeamChooser>(tokenizer, options, c.n_vocab, prompt, std::move(constraint));
  } else {
    g->chooser_ = std::make_unique<SingleChooser>(tokenizer, options, c.n_vocab, prompt,
                                                  std::move(constraint));
  }
  if (!g->beams_ && options.speculation.enabled() && options.use_cache &&
      options.context_overflow == ContextOverflow::kError) {
    g->speculator_ = std::make_unique<Speculator>(options.speculation, prompt, nullptr, nullptr);
  }
  // One sequence to begin with: the prompt, of which `cached` may hold a prefix.
  BlockTable table;
  if (cached != nullptr && !cached->empty()) {
    // At least the last prompt token must run to produce logits.
    const int reusable = std::min<int>(cached->num_tokens, static_cast<int>(prompt.size()) - 1);
    if (options.use_cache && reusable > 0) {
      if (reusable < cached->num_tokens) cache.Truncate(*cached, reusable);
      table = std::move(*cached);
      g->stats_.cached_tokens = reusable;
    } else {
      cache.Free(*cached);
    }
  }
  g->feeds_.emplace_back(std::move(table), std::move(prompt));
  return g;
}

void Generation::SetDraftModel(CausalLm* model, KvCache* cache) {
  if (speculator_ == nullptr) return;
  speculator_ = std::make_unique<Speculator>(options_.speculation, prompt_, model, cache);
}

absl::Status Generation::PrepareStep(std::vector<ForwardSeq>* seqs, int max_prompt_tokens,
                                     int max_draft_tokens) {
  if (phase_ == Phase::kDone) return absl::FailedPreconditionError("generation already finished");
  if (cancelled_.load()) {
    Abort();  // only skips the session catch-up when the answer is complete
    return absl::OkStatus();
  }
  if (!finished() && !choice_open_) {
    TG_RETURN_IF_ERROR(OpenChoice());
    choice_open_ = true;
  }
  int budget = prefilling() ? std::max(0, max_prompt_tokens) : kUnlimitedTokens;
  if (finished()) {
    kept_.Prepare(budget, seqs, SequenceFeed::Rows::kNone);
    return absl::OkStatus();
  }
  // Drafts go after the last chosen token, once per choice (a pass prepared again keeps them).
  if (speculator_ != nullptr && drafts_.empty() && phase_ == Phase::kDecode) {
    speculator_->Propose(std::min(DraftRoom(), max_draft_tokens), draft_costs_, &drafts_);
    feeds_[0].Append(drafts_);
  }
  if (!drafts_.empty()) {
    feeds_[0].Prepare(kUnlimitedTokens, seqs, SequenceFeed::Rows::kAll);
    return absl::OkStatus();
  }
  // A feed that ran out in an earlier pass towards this choice (cache off, beams) adds nothing,
  // and once the budget is spent neither does any after it.
  for (SequenceFeed& f : feeds_) budget -= f.Prepare(budget, seqs);
  return absl::OkStatus();
}

int Generation::DraftRoom() const {
  if (speculator_ == nullptr) return 0;
  // The answer's last token ends it without a pass after it, and the context must hold every
  // draft and the token chosen after them.
  const int generated = static_cast<int>(feeds_[0].target().size() - prompt_.size());
  const int by_length = options_.max_new_tokens - generated - 1;
  const int by_context = n_ctx_ - static_cast<int>(feeds_[0].target().size()) - 1;
  return std::max(0, std::min(by_length, by_context));
}

absl::Status Generation::OpenChoice() {
  const int drop = BlocksToDrop();
  if (finished()) return absl::OkStatus();
  if (drop > 0 && options_.use_cache) {
    std::vector<BlockTable*> tables;
    for (SequenceFeed& f : feeds_) tables.push_back(&f.table());
    TG_RETURN_IF_ERROR(model_.ShiftContext(cache_, tables, keep_blocks_, drop));
  }
  for (SequenceFeed& f : feeds_) {
    // Without the cache every sequence is recomputed from scratch.
    if (!options_.use_cache) f.Restart(cache_);
    if (drop > 0) f.Drop(keep_blocks_ * block_size_, drop * block_size_);
  }
  if (drop > 0) {
    dropped_blocks_ += drop;
    ++stats_.context_shifts;
  }
  return absl::OkStatus();
}

int Generation::BlocksToDrop() {
  // Tokens in context once this choice's feeds have run (the live sequences are equally long).
  const int64_t ctx_after = static_cast<int64_t>(feeds_[0].target().size());
  if (options_.context_overflow == ContextOverflow::kError) {
    // The prompt and the answer together hold at most the context: with ctx_after tokens
    // already, the next choice would be one more than it allows. Only reached with
    // stop_at_context_limit (else max_new_tokens was validated against the context).
    if (ctx_after >= n_ctx_) Finish(FinishReason::kContextFull);
    return 0;
  }
  if (ctx_after <= n_ctx_) return 0;
  return static_cast<int>((ctx_after - n_ctx_ + block_size_ - 1) / block_size_);
}

bool Generation::prefilling() const {
  switch (phase_) {
    case Phase::kPrompt:
    case Phase::kCatchUp:
      return true;
    case Phase::kDecode:
      return !options_.use_cache;  // every choice recomputes its sequences
    case Phase::kDone:
      break;
  }
  return false;
}

int Generation::pending_prompt_tokens() const {
  if (!prefilling()) return 0;
  if (finished()) return std::max(0, kept_.left());
  int left = 0;
  for (const SequenceFeed& f : feeds_) left += std::max(0, f.left());
  return left;
}

absl::Status Generation::ConsumeStep(const float* logits) {
  if (phase_ == Phase::kDone) return absl::FailedPreconditionError("generation already finished");
  if (finished()) {
    ConsumeCatchUp();
    return absl::OkStatus();
  }
  // A sequence's logits row comes with the pass that runs the last token of its feed. When
  // every sequence's feed ended in this pass the rows are in order already; otherwise (cache
  // off with beams over several passes) they are gathered in step_logits_.
  bool direct = true;
  for (const SequenceFeed& f : feeds_) direct = direct && f.pending() > 0 && f.complete();
  if (!direct) step_logits_.resize(feeds_.size() * n_vocab_);
  bool complete = true;
  bool filled_block = false;  // some sequence completed a block in this pass
  size_t row = 0;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    SequenceFeed& f = feeds_[i];
    const int ran = f.Commit();
    if (ran > 0) {
      filled_block =
          filled_block || (f.computed() - ran) / block_size_ < f.computed() / block_size_;
      if (f.complete()) {
        if (!direct) {
          std::memcpy(&step_logits_[i * n_vocab_], logits + row * n_vocab_,
                      n_vocab_ * sizeof(float));
        }
        ++row;
      }
    }
    complete = complete && f.complete();
  }
  if (!drafts_.empty()) {
    choice_open_ = false;
    TG_RETURN_IF_ERROR(Verify(logits));
    TrackBlocks();
    return absl::OkStatus();
  }
  // Before the choice below forks or drops sequences: their tables hold exactly what ran.
  if (filled_block) PublishBlocks();
  if (!complete) {
    TrackBlocks();
    return absl::OkStatus();  // a prompt chunk: nothing to choose yet
  }
  choice_open_ = false;
  if (phase_ == Phase::kPrompt) phase_ = Phase::kDecode;
  TG_RETURN_IF_ERROR(Choose(direct ? logits : step_logits_.data()));
  if (stats_.time_to_first_token_s == 0) stats_.time_to_first_token_s = SecondsSince(start_);
  TrackBlocks();
  return absl::OkStatus();
}

void Generation::ConsumeCatchUp() {
  kept_.Commit();
  if (!kept_.complete()) return;
  cache_.PublishTail(kept_.table(), kept_.target(), PrefixShareableBlocks(options_, block_size_));
  phase_ = Phase::kDone;
}

absl::Status Generation::Choose(const float* rows) {
  TG_ASSIGN_OR_RETURN(TokenChoice choice, chooser_->Choose(rows));
  stream_.Commit(chooser_->TakeCertain());
  if (speculator_ != nullptr && !choice.next.empty()) speculator_->Accept(choice.next[0].token);
  // A single sequence also ends where its text meets a stop string (beams judge stop strings
  // per candidate: see beam_chooser.h).
  if (!beams_ && stream_.stopped()) {
    Finish(FinishReason::kStopSequence);
  } else if (choice.end.has_value()) {
    Finish(*choice.end);
  } else {
    Follow(choice.next);
  }
  return absl::OkStatus();
}

absl::Status Generation::Verify(const float* rows) {
  const int k = static_cast<int>(drafts_.size());
  SequenceFeed& feed = feeds_[0];
  const int before = feed.computed() - k;  // the KV through the last chosen token
  int chosen = 0, accepted = 0;
  std::optional<FinishReason> end;
  int32_t next = -1;  // the chosen token after the kept drafts, when the answer goes on
  for (int i = 0; i <= k; ++i) {
    TG_ASSIGN_OR_RETURN(TokenChoice choice,
                        chooser_->Choose(rows + static_cast<size_t>(i) * n_vocab_));
    stream_.Commit(chooser_->TakeCertain());
    ++chosen;
    const int32_t token = choice.end ? chooser_->answer_ids().back() : choice.next[0].token;
    speculator_->Accept(token);
    const bool is_draft = i < k && token == drafts_[i];
    accepted += is_draft ? 1 : 0;
    if (stream_.stopped()) {
      end = FinishReason::kStopSequence;
    } else if (choice.end.has_value()) {
      end = choice.end;
    } else if (!is_draft) {
      next = token;
    }
    if (end.has_value() || !is_draft) break;
  }
  stats_.drafted_tokens += k;
  stats_.accepted_tokens += accepted;
  speculator_->Verified(k, accepted);
  drafts_.clear();
  // The cache keeps the drafts that were chosen before the last choice (which, as every last
  // choice, is not computed yet); the rest leave it and the prefix cache.
  TG_RETURN_IF_ERROR(feed.Rollback(cache_, before + chosen - 1));
  PublishBlocks();
  if (end.has_value()) {
    Finish(*end);
  } else {
    feed.Append(next);
  }
  return absl::OkStatus();
}

void Generation::Follow(const std::vector<BeamChoice>& next) {
  // Children continue their parent's cache: the last child takes the parent's feed, earlier
  // ones fork it (shared blocks, copy-on-write later); parents without children are freed.
  std::vector<int> remaining(feeds_.size(), 0);
  for (const BeamChoice& c : next) ++remaining[c.parent];
  std::vector<SequenceFeed> feeds(next.size());
  for (size_t j = 0; j < next.size(); ++j) {
    SequenceFeed& parent = feeds_[next[j].parent];
    feeds[j] = --remaining[next[j].parent] > 0 ? parent.Fork(cache_) : std::move(parent);
    feeds[j].Append(next[j].token);
  }
  for (SequenceFeed& f : feeds_) f.Free(cache_);  // parents with no child (moved ones are empty)
  feeds_ = std::move(feeds);
}

void Generation::PublishBlocks() {
  // Every token the feeds computed is final here. (A pass that verifies drafted tokens must
  // publish only up to the accepted ones: a published block is shared, never rolled back.)
  const int limit = PrefixShareableBlocks(options_, block_size_);
  if (limit == 0 || !cache_.prefix_cache_enabled()) return;
  for (const SequenceFeed& f : feeds_) cache_.PublishPrefix(f.table(), f.target(), limit);
}

void Generation::PublishTail() {
  const int limit = PrefixShareableBlocks(options_, block_size_);
  // Beams: a running beam's table need not line up with its ids once the search has ended.
  if (limit == 0 || beams_ || dropped_blocks_ != 0 || feeds_.size() != 1) return;
  if (!cache_.prefix_cache_enabled()) return;
  cache_.PublishTail(feeds_[0].table(), feeds_[0].target(), limit);
}

void Generation::TrackBlocks() {
  stats_.peak_kv_blocks = std::max(stats_.peak_kv_blocks, blocks_in_use());
}

int Generation::blocks_in_use() const {
  absl::flat_hash_set<int32_t> blocks;
  for (const SequenceFeed& f : feeds_) {
    blocks.insert(f.table().blocks.begin(), f.table().blocks.end());
  }
  return static_cast<int>(blocks.size());
}

void Generation::Finish(FinishReason reason) {
  if (finished()) return;
  finish_ = reason;
  stream_.Finish(chooser_->End());
  if (speculator_ != nullptr) speculator_->Release();
  stats_.total_s = SecondsSince(start_);
  // Every slot of a finished sequence holds its final K/V (a cancel only comes between
  // passes, but an abort after a failed pass may not), so its tail can serve a request that
  // resends this conversation.
  if (reason != FinishReason::kCancelled) PublishTail();
  // A slid window no longer lines up with the conversation's tokens: nothing to keep then.
  if (keep_cache_ && dropped_blocks_ == 0 && !feeds_.empty() && !feeds_[0].table().empty()) {
    kept_ = std::move(feeds_[0]);
    // A running beam's history need not be the best hypothesis; the prompt is common to all.
    if (beams_) kept_.Truncate(cache_, static_cast<int>(prompt_.size()));
  }
  FreeAll();
  kept_.Truncate(cache_, kept_.computed());  // no catch-up unless planned
  if (keep_cache_ && reason != FinishReason::kCancelled) PlanCatchUp();
  phase_ = kept_.complete() ? Phase::kDone : Phase::kCatchUp;
}

void Generation::PlanCatchUp() {
  if (kept_.table().empty()) return;
  std::vector<int32_t> conversation(prompt_);
  const std::vector<int32_t> answer = chooser_->answer_ids();
  conversation.insert(conversation.end(), answer.begin(), answer.end());
  // A conversation past the context cannot be cached whole; the next turn recomputes.
  const size_t have = static_cast<size_t>(kept_.computed());
  if (have >= conversation.size() || conversation.size() > static_cast<size_t>(n_ctx_)) return;
  kept_.Append(absl::MakeConstSpan(conversation).subspan(have));
}

void Generation::Abort() {
  Finish(FinishReason::kCancelled);
  kept_.Truncate(cache_, kept_.computed());  // the session catch-up is skipped
  phase_ = Phase::kDone;
}

void Generation::FreeAll() {
  for (SequenceFeed& f : feeds_) f.Free(cache_);
}

GenerationResult Generation::TakeResult() {
  GenerationResult r;
  r.finish_reason = finish_;
  r.hypotheses = chooser_->Results(finish_, stream_.text());
  r.tokens = stream_.TakeTokens();
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
