// One generation request as a step-wise state machine over the shared model and KV cache:
// greedy, sampling or beam search; stop rules; streaming; logprobs; sliding context window.
//
// A driver (Generate() below, or a scheduler batching many requests) repeats:
//   PrepareStep(&seqs, budget) -> this request's sequences for the next forward pass
//   CausalLm::Forward        -> logits rows for the sequences that want them
//   ConsumeStep(rows)          -> choose tokens, fork/free beams, stream, maybe finish
// until done(). Beams of one request advance together in one pass and share KV blocks
// (forks of block tables, copy-on-write of a shared partial last block).
//
// Chunked prefill: work that is not one decode token per sequence -- the prompt (after a
// session's cached prefix), every step's recompute with the cache off, and a session's
// catch-up after the answer -- is "prompt work" and runs at most `budget` tokens per pass, so a
// long prompt takes several passes and does not stall the requests batched with it. A chunk
// that does not end its sequence's feed asks for no logits (ForwardSeq::logits = false), and
// ConsumeStep only chooses a token once every sequence's feed has run. Decode tokens ignore
// the budget. Chunking changes only how many rows a matmul sees, so results equal an unchunked
// run's up to float summation order.
//
// Stop sequences (DecodingOptions::stop) are searched in the generated text only, never the
// prompt. Greedy / sampling stop once the decoded text contains one; beam search treats a
// candidate that completes one as terminal (beam_chooser.h). The stream never carries stop
// text: the concatenated StreamDelta::text equals hypotheses[0].text.
//
// The parts (each in its own file): a TokenChooser decides tokens (SingleChooser: greedy /
// sampling; BeamChooser), a SequenceFeed per live sequence holds its KV cache and what is left to
// run (prompt, recompute, catch-up), and a StreamAssembler turns committed tokens into the
// stream. Generation orchestrates them: the passes, the sliding window, finishing, the session's
// kept cache and the prefix cache.
#ifndef TEXTGEN_ENGINE_DECODING_GENERATION_H_
#define TEXTGEN_ENGINE_DECODING_GENERATION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/decoding/decoding_options.h"
#include "engine/decoding/generation_output.h"  // GeneratedToken, StreamDelta, Hypothesis
#include "engine/decoding/sequence_feed.h"
#include "engine/decoding/speculator.h"
#include "engine/decoding/stream_assembler.h"
#include "engine/decoding/token_chooser.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

// A token budget that never binds.
inline constexpr int kUnlimitedTokens = std::numeric_limits<int>::max();

// How many leading KV blocks of a request with these options may be shared through the prefix
// cache (KvCache::MatchPrefix / PublishPrefix): none without the cache (every step recomputes),
// only the never-shifted first n_keep blocks with a sliding window (the shift rotates the rest
// in place), else all.
int PrefixShareableBlocks(const DecodingOptions& options, int block_size);

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;  // of the best hypothesis
  int peak_kv_blocks = 0;    // most blocks this request held at once
  int context_shifts = 0;    // sliding-window drops
  int cached_tokens = 0;     // prompt tokens whose K/V came from `cached` (not recomputed)
  // Speculative decoding: tokens drafted and verified, and how many of them were kept.
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  double time_to_first_token_s = 0;
  double total_s = 0;
};

struct GenerationResult {
  std::vector<Hypothesis> hypotheses;  // best first; 1 unless beam num_return_sequences > 1
  FinishReason finish_reason = FinishReason::kLength;  // of the best
  std::vector<GeneratedToken> tokens;  // the best's tokens (top logprobs: greedy/sampling only)
  GenerationStats stats;
};

// Not thread-safe except Cancel(), which any thread may call.
class Generation {
 public:
  // Validates `options` against the model (InvalidArgument naming the field) and the prompt
  // ids against the vocabulary. Borrows model, tokenizer and cache: they must outlive it.
  //
  // `cached` (optional) holds the K/V of the first cached->num_tokens prompt tokens (a
  // session's earlier turns, or blocks shared through the prefix cache): only the rest of the
  // prompt is prefilled. On success Generation takes it (leaving *cached empty); on error
  // *cached is untouched.
  //
  // With the cache's prefix cache enabled, every full block this request computes is
  // published as soon as the pass that fills it has run (see PrefixShareableBlocks).
  static absl::StatusOr<std::unique_ptr<Generation>> Create(
      CausalLm& model, const Tokenizer& tokenizer, KvCache& cache, std::vector<int32_t> prompt,
      const DecodingOptions& options, StreamSink sink = nullptr, BlockTable* cached = nullptr);
  ~Generation();  // frees every block the request holds

  // The draft model for DraftSource::kDraftModel (borrowed; must outlive this). Before the
  // first PrepareStep; without it such a request drafts by n-gram lookup.
  void SetDraftModel(CausalLm* model, KvCache* cache);

  // Asks Finish to keep a cache for the conversation's next turn (see ReleaseCache).
  void KeepCacheForNextTurn() { keep_cache_ = true; }
  // After done(), with KeepCacheForNextTurn: a table holding the K/V of the first num_tokens of
  // prompt + best hypothesis (greedy/sampling: everything but the last token; beams: the
  // prompt). Empty when nothing can be kept (e.g. the window slid). The caller owns it.
  BlockTable ReleaseCache() { return kept_.TakeTable(); }

  // Appends this request's sequences for the next pass (spans point into this object and stay
  // valid until ConsumeStep). Shifts the context window first when it is full (kSlide). While
  // prefilling() at most `max_prompt_tokens` tokens in all (possibly none: the request waits);
  // decode tokens always run. Calling it again before ConsumeStep (the pass did not run)
  // prepares the same pass again. Must not be called once done().
  //
  // Speculative decoding (options.speculation, greedy and sampling with the cache on, no
  // sliding window): a decode pass may run up to `max_draft_tokens` drafted tokens after the
  // last chosen one (k+1 rows); ConsumeStep then chooses row by row, exactly as without drafts,
  // keeps the drafts that equal the choices and rolls the KV cache back past the first that
  // does not. So the tokens, logprobs and random draws are those of the run without drafts,
  // given that each row equals its one-row result (batch-invariant kernels).
  absl::Status PrepareStep(std::vector<ForwardSeq>* seqs, int max_prompt_tokens = kUnlimitedTokens,
                           int max_draft_tokens = kUnlimitedTokens);
  // What passes with drafts cost (the scheduler's RowCostModel): the adaptive draft length
  // weighs drafts with them (the default: rows are free).
  void SetDraftCosts(const DraftCosts& costs) { draft_costs_ = costs; }
  // After the pass ran, if PrepareStep added any sequence. `logits` [rows, vocab]: one row per
  // sequence PrepareStep added with ForwardSeq::logits set, in order (unused, may be null, when
  // there were none: a prompt chunk only advances the prefill).
  absl::Status ConsumeStep(const float* logits);
  // Whether the next pass runs prompt work that counts against a step's budget (see the top):
  // false when it feeds one decode token per sequence.
  bool prefilling() const;
  // Prompt work already known to be ahead (tokens) before the next choice; 0 when decoding.
  int pending_prompt_tokens() const;
  // Finishes with kCancelled at the next step boundary (or, when the answer is complete, skips
  // the session catch-up); blocks are freed then (or at destruction).
  void Cancel() { cancelled_.store(true); }
  bool cancel_requested() const { return cancelled_.load(); }
  // Ends the request now (e.g. the driver failed): frees blocks, finish reason kCancelled
  // (unless the answer was complete and only the session catch-up was left).
  void Abort();

  // No more passes: the answer is complete and, with KeepCacheForNextTurn, the kept table
  // holds the whole conversation (or as much as could be kept).
  bool done() const { return phase_ == Phase::kDone; }
  // After done().
  GenerationResult TakeResult();
  int blocks_in_use() const;

 private:
  // Where the request is. The answer is complete from kCatchUp on.
  enum class Phase {
    kPrompt,   // before the first choice: the prompt runs (in chunks)
    kDecode,   // choosing tokens
    kCatchUp,  // the answer is complete; the kept table runs the tokens it lacks
    kDone,     // no pass is left
  };

  Generation(CausalLm& model, const Tokenizer& tokenizer, KvCache& cache,
             std::vector<int32_t> prompt, const DecodingOptions& options, StreamSink sink);

  bool finished() const { return phase_ == Phase::kCatchUp || phase_ == Phase::kDone; }
  // Before the passes towards a choice: slides the window if it is full (or finishes with
  // kContextFull), and without the cache empties every sequence's table to run it again.
  absl::Status OpenChoice();
  // Blocks to drop so that the next choice fits the context; finishes instead when the
  // context may not slide.
  int BlocksToDrop();
  // After the pass that completed every feed: `rows` [n_seqs, vocab].
  absl::Status Choose(const float* rows);
  // Whether this decode pass may carry drafts, and how many at most (0: none).
  int DraftRoom() const;
  // After a pass that ran drafts_: `rows` [drafts_.size() + 1, vocab], the rows after the last
  // chosen token and after each draft. Chooses row by row, keeps the KV of the drafts that were
  // chosen, and finishes or continues like Choose.
  absl::Status Verify(const float* rows);
  // The feeds follow the choice: children continue their parent's cache.
  void Follow(const std::vector<BeamChoice>& next);
  // Ends the answer: final stream delta, result, kept table. kDone unless a session catch-up
  // is left to run.
  void Finish(FinishReason reason);
  // With KeepCacheForNextTurn: appends to kept_'s target the answer's tokens it lacks.
  void PlanCatchUp();
  void ConsumeCatchUp();
  // Publishes the live sequences' full blocks (their targets: prompt + generated tokens).
  void PublishBlocks();
  // At the end: the single sequence's full blocks and partly filled last block (a leaf).
  void PublishTail();
  void TrackBlocks();
  void FreeAll();

  CausalLm& model_;
  KvCache& cache_;
  const std::vector<int32_t> prompt_;
  const DecodingOptions options_;
  const bool beams_;  // options_.method == kBeam
  const int n_vocab_;
  const int n_ctx_;
  const int block_size_;
  const int keep_blocks_;  // sliding window: leading blocks never dropped
  std::atomic<bool> cancelled_{false};
  Phase phase_ = Phase::kPrompt;
  bool choice_open_ = false;  // OpenChoice ran for the next choice; passes are running the feeds
  FinishReason finish_ = FinishReason::kLength;
  int dropped_blocks_ = 0;  // sliding window: blocks dropped after the kept prefix so far
  std::unique_ptr<TokenChooser> chooser_;
  std::unique_ptr<Speculator> speculator_;  // null without speculation
  std::vector<int32_t> drafts_;             // in the prepared pass, after the last chosen token
  DraftCosts draft_costs_ = FreeDraftCosts();
  StreamAssembler stream_;
  std::vector<SequenceFeed> feeds_;  // one per live sequence (1, or the running beams)
  bool keep_cache_ = false;
  // See ReleaseCache. From Finish on: the table kept for the session, its target the
  // conversation it will hold once the catch-up (logit-less chunks before done()) has run, so
  // that the next turn prefills only its own tokens.
  SequenceFeed kept_;
  std::vector<float> step_logits_;  // [n_seqs, vocab] rows of feeds that ended in earlier passes
  GenerationStats stats_;
  std::chrono::steady_clock::time_point start_;
};

// Runs one request alone to completion (the single-request driver), at most `max_step_tokens`
// prompt tokens per pass (>= 1, else InvalidArgument).
absl::StatusOr<GenerationResult> Generate(CausalLm& model, const Tokenizer& tokenizer,
                                          KvCache& cache, std::vector<int32_t> prompt,
                                          const DecodingOptions& options, StreamSink sink = nullptr,
                                          int max_step_tokens = kUnlimitedTokens);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_GENERATION_H_
