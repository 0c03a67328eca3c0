// What a generation request asks for: method, limits, stop rules, outputs, context policy.
#ifndef TEXTGEN_ENGINE_DECODING_DECODING_OPTIONS_H_
#define TEXTGEN_ENGINE_DECODING_DECODING_OPTIONS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/decoding/beam_search.h"
#include "engine/decoding/sampler.h"
#include "engine/decoding/speculation_options.h"
#include "engine/decoding/token_constraint.h"

namespace textgen {

enum class DecodingMethod { kGreedy, kSample, kBeam };
enum class ContextOverflow {
  kError,  // prompt + max_new_tokens must fit the context
  kSlide,  // keep the first n_keep tokens, drop the oldest of the rest in whole blocks
};
enum class FinishReason {
  kLength,
  kEos,
  kStopSequence,
  kContextFull,
  kCancelled,
  kConstraintComplete,  // the constraint's output was complete and allowed nothing more
};
std::string_view FinishReasonName(FinishReason r);  // "length", "eos", "stop_sequence", ...

inline constexpr int kMaxTopLogprobs = 20;

struct DecodingOptions {
  DecodingMethod method = DecodingMethod::kGreedy;
  int max_new_tokens = 256;
  // true: each step feeds only the new token(s), reusing cached K/V. false: each step
  // recomputes every live sequence from scratch (a check on the cache; O(n^2)).
  bool use_cache = true;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // matched on text across token boundaries; not returned
  int top_logprobs = 0;           // 0..20 alternatives per generated token
  ContextOverflow context_overflow = ContextOverflow::kError;
  int n_keep = 0;  // kSlide: leading tokens never dropped (rounded up to whole blocks)
  // kError only: instead of rejecting prompt + max_new_tokens beyond the context, generate
  // until the context is full and finish with kContextFull (servers use it when the client
  // left max_new_tokens to the default).
  bool stop_at_context_limit = false;
  SamplingParams sampling;  // kSample (temperature 0 = greedy); repetition_penalty for all
  // kBeam: num_beams, length_penalty, early_stopping, num_return_sequences. max_new_tokens,
  // eos and ignore_eos are taken from the fields above.
  BeamSearchOptions beam;
  // Constrained output (see token_constraint.h): unset, every token may come.
  TokenConstraintFactory constraint;
  // Control tokens whose text is part of the output text (e.g. a family's tool-call markers
  // such as [TOOL_CALLS] or <|python_tag|>, whose decoded bytes are otherwise empty), so that
  // whoever reads the stream can tell where markup begins.
  std::vector<int32_t> shown_special_tokens;
  // Speculative decoding (greedy and sampling; ignored by beam search): only the speed changes.
  SpeculationOptions speculation;
};

// InvalidArgument naming the field and its allowed range. `n_ctx` and `prompt_tokens` check
// the context policy.
absl::Status ValidateDecodingOptions(const DecodingOptions& o, int n_ctx, int prompt_tokens);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_DECODING_OPTIONS_H_
