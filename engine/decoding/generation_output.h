// What a generation produces: generated tokens, the stream's deltas, finished hypotheses.
// Shared by Generation (generation.h, which callers include) and the parts it drives: the token
// choosers and the stream assembler.
#ifndef TEXTGEN_ENGINE_DECODING_GENERATION_OUTPUT_H_
#define TEXTGEN_ENGINE_DECODING_GENERATION_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/decoding/decoding_options.h"
#include "engine/decoding/top_logprobs.h"

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
  std::string text;              // decoded, cut before the stop string when it stopped on one
  double score = 0;              // beam: cum_logprob / len^alpha; else cum_logprob
  double cum_logprob = 0;
  FinishReason finish_reason = FinishReason::kLength;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_GENERATION_OUTPUT_H_
