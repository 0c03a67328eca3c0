// Single-sequence generation on the paged cache: greedy decoding with per-token logprobs.
// The batched, multi-request step loop builds on the same model call (LlamaModel::Forward).
#ifndef TEXTGEN_ENGINE_DECODING_GENERATOR_H_
#define TEXTGEN_ENGINE_DECODING_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/llama_model.h"

namespace textgen {

enum class FinishReason { kLength, kEos };
std::string_view FinishReasonName(FinishReason r);  // "length", "eos"

struct GenerateOptions {
  int max_new_tokens = 256;
  // true: each step feeds only the new token, reusing cached K/V. false: each step recomputes
  // the whole sequence from scratch (for checking the cache; O(n^2)).
  bool use_cache = true;
  bool ignore_eos = false;
};

struct GenerationResult {
  std::vector<int32_t> ids;      // generated tokens (EOS included when it ended so)
  std::vector<double> logprobs;  // natural-log probability of each generated token
  FinishReason finish_reason = FinishReason::kLength;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // first forward pass over the prompt
  double decode_seconds = 0;   // the remaining steps
};

// Called with each generated token as soon as it is chosen.
using TokenCallback = std::function<void(int32_t id, double logprob)>;

// Greedy decoding (ties: lowest token id). InvalidArgument for an empty prompt, ids outside
// the vocabulary, or prompt + max_new_tokens beyond the model's context (naming the numbers);
// ResourceExhausted when the cache cannot hold the sequence. Leaves `cache` as it found it.
absl::StatusOr<GenerationResult> GenerateGreedy(LlamaModel& model, KvCache& cache,
                                                absl::Span<const int32_t> prompt, int32_t eos_id,
                                                const GenerateOptions& options,
                                                const TokenCallback& on_token = nullptr);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_GENERATOR_H_
