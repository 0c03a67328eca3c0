// One generation request as a step-wise state machine over the shared model and KV cache:
// greedy, sampling or beam search; stop rules; streaming; logprobs; sliding context window.
//
// A driver (Generate() below, or a scheduler batching many requests) repeats:
//   PrepareStep(&seqs)  -> this request's sequences for the next forward pass
//   LlamaModel::Forward -> one logits row per sequence
//   ConsumeStep(rows)   -> choose tokens, fork/free beams, stream, maybe finish
// until done(). Beams of one request advance together in one pass and share KV blocks
// (forks of block tables, copy-on-write of a shared partial last block).
#ifndef TEXTGEN_ENGINE_DECODING_GENERATION_H_
#define TEXTGEN_ENGINE_DECODING_GENERATION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/decoding/beam_search.h"
#include "engine/decoding/decoding_options.h"
#include "engine/decoding/sampler.h"
#include "engine/decoding/stop_matcher.h"
#include "engine/decoding/top_logprobs.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/llama_model.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

struct GeneratedToken {
  int32_t id = 0;
  // Text this token completes: whole UTF-8 characters only (a byte-fallback token that starts
  // a character carries "", the one that ends it carries the character).
  std::string text;
  double logprob = 0;             // natural log of its probability under the model
  std::vector<TokenLogprob> top;  // the top_logprobs most likely alternatives
};

// What a step makes certain. `tokens` are committed; `text` is the new text (stop strings and
// any text that may still turn into one are held back).
struct StreamDelta {
  std::vector<GeneratedToken> tokens;
  std::string text;
};
using StreamSink = std::function<void(const StreamDelta&)>;

struct Hypothesis {
  std::vector<int32_t> ids;      // generated ids (EOS included when it ended so)
  std::vector<double> logprobs;  // per id
  std::string text;              // decoded, stop string removed
  double score = 0;              // beam: cum_logprob / len^alpha; else cum_logprob
  double cum_logprob = 0;
  FinishReason finish_reason = FinishReason::kLength;
};

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;  // of the best hypothesis
  int peak_kv_blocks = 0;    // most blocks this request held at once
  int context_shifts = 0;    // sliding-window drops
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
  static absl::StatusOr<std::unique_ptr<Generation>> Create(
      LlamaModel& model, const Tokenizer& tokenizer, KvCache& cache, std::vector<int32_t> prompt,
      const DecodingOptions& options, StreamSink sink = nullptr);
  ~Generation();  // frees every block the request holds

  // Appends this request's sequences for the next pass (spans point into this object and stay
  // valid until ConsumeStep). Shifts the context window first when it is full (kSlide).
  // Must not be called once done().
  absl::Status PrepareStep(std::vector<ForwardSeq>* seqs);
  // `logits` [n, vocab]: one row per sequence PrepareStep added, in order.
  absl::Status ConsumeStep(const float* logits);
  // Finishes with kCancelled at the next step boundary; blocks are freed then (or at
  // destruction).
  void Cancel() { cancelled_.store(true); }
  bool cancel_requested() const { return cancelled_.load(); }
  // Ends the request now (e.g. the driver failed): frees blocks, finish reason kCancelled.
  void Abort();

  bool done() const { return done_; }
  // After done().
  GenerationResult TakeResult();
  int blocks_in_use() const;

 private:
  struct Seq {
    BlockTable table;
    std::vector<int32_t> feed;  // tokens to run next step (cache on)
  };
  Generation(LlamaModel& model, const Tokenizer& tokenizer, KvCache& cache,
             std::vector<int32_t> prompt, const DecodingOptions& options, StreamSink sink);

  // Tokens in context for a sequence whose generated ids are `gen` (prompt + gen minus what
  // the sliding window dropped).
  std::vector<int32_t> WindowTokens(const std::vector<int32_t>& gen) const;
  absl::Status MaybeShift();
  void TrackBlocks();
  void Finish(FinishReason reason);
  void FreeAll();
  // Greedy / sampling.
  void ConsumeSingle(const float* logits);
  void EmitSingle(int32_t id, double logprob, std::vector<TokenLogprob> top);
  // Beam search.
  void ConsumeBeams(const float* logits);
  void StreamCertainPrefix();

  LlamaModel& model_;
  const Tokenizer& tok_;
  KvCache& cache_;
  const std::vector<int32_t> prompt_;
  DecodingOptions options_;
  StreamSink sink_;
  const int n_vocab_;
  const int n_ctx_;
  const int block_size_;
  const int keep_blocks_;
  std::atomic<bool> cancelled_{false};
  bool done_ = false;
  bool started_ = false;
  FinishReason finish_ = FinishReason::kLength;
  int dropped_blocks_ = 0;  // sliding window: blocks dropped after the kept prefix so far
  int ctx_len_ = 0;         // tokens in context once the pending feed has run
  std::vector<Seq> seqs_;   // live sequences (1, or the running beams)
  std::vector<std::vector<int32_t>> window_;  // cache off: what PrepareStep fed, per seq
  std::vector<double> logprobs_;              // [vocab] scratch
  std::vector<float> processed_;              // [vocab] scratch
  GenerationStats stats_;
  std::chrono::steady_clock::time_point start_;

  // Greedy / sampling state.
  std::optional<Sampler> sampler_;
  std::vector<int32_t> generated_;
  std::vector<int32_t> context_;  // prompt + generated: the repetition penalty's context
  std::vector<double> generated_logprobs_;
  std::vector<GeneratedToken> tokens_;
  IncrementalDetokenizer detok_;
  StopMatcher stop_;
  std::string text_;  // emitted so far

  // Beam state.
  std::optional<BeamSearch> beam_;
  std::vector<std::vector<double>> beam_logprobs_;  // per running beam, per generated token
  std::vector<double> rows_;                        // [n_beams, vocab] log-softmax rows
  size_t streamed_ = 0;                             // certain-prefix tokens already streamed
  IncrementalDetokenizer beam_detok_;
  std::vector<GeneratedToken> beam_tokens_;
  std::vector<BeamHypothesis> beam_results_;
};

// Runs one request alone to completion (the single-request driver).
absl::StatusOr<GenerationResult> Generate(LlamaModel& model, const Tokenizer& tokenizer,
                                          KvCache& cache, std::vector<int32_t> prompt,
                                          const DecodingOptions& options,
                                          StreamSink sink = nullptr);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_GENERATION_H_
