// What a request asks of speculative decoding. Speculation never changes the output: drafted
// tokens are verified by the target model in one multi-row pass and kept only where the target
// would have chosen them (greedy: the same id; sampling: the rejection-sampling rule, so the
// output distribution is the target's). It changes only the speed. Beam search never speculates.
#ifndef TEXTGEN_ENGINE_DECODING_SPECULATION_OPTIONS_H_
#define TEXTGEN_ENGINE_DECODING_SPECULATION_OPTIONS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace textgen {

enum class DraftSource {
  kNone,        // no speculation
  kNgram,       // prompt lookup: the continuation of the latest earlier match of the text's end
  kDraftModel,  // a small model with the target's vocabulary (the server's --draft-model)
};
std::string_view DraftSourceName(DraftSource s);  // "none", "ngram", "draft-model"

// Drafted tokens verified per pass, at most.
inline constexpr int kMaxSpeculativeTokens = 16;

struct SpeculationOptions {
  DraftSource source = DraftSource::kNone;
  int max_draft_tokens = 4;  // k, in [1, kMaxSpeculativeTokens]
  // Draft fewer (or no) tokens while they do not pay: each pass's k in [0, max_draft_tokens]
  // follows the request's acceptance and the measured cost of a row (draft_length.h). false:
  // always max_draft_tokens when a source has them.
  bool adaptive = true;
  // A client's guess of the output (OpenAI's Predicted Outputs), tokenized: searched like the
  // prompt by the n-gram drafter, before any other source. Speculates even when source is kNone.
  std::vector<int32_t> prediction;

  bool enabled() const { return source != DraftSource::kNone || !prediction.empty(); }
};

// InvalidArgument naming the field.
absl::Status ValidateSpeculationOptions(const SpeculationOptions& o);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_DECODING_SPECULATION_OPTIONS_H_
