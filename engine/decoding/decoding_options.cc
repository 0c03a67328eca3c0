#include "engine/decoding/decoding_options.h"

#include "absl/strings/str_cat.h"
#include "engine/decoding/stop_matcher.h"
#include "engine/util/status_macros.h"

namespace textgen {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopSequence:
      return "stop_sequence";
    case FinishReason::kContextFull:
      return "context_full";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kConstraintComplete:
      return "constraint_complete";
  }
  return "unknown";
}

absl::Status ValidateDecodingOptions(const DecodingOptions& o, int n_ctx, int prompt_tokens) {
  if (o.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens must be >= 1, got ", o.max_new_tokens));
  }
  if (o.top_logprobs < 0 || o.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", o.top_logprobs));
  }
  TG_RETURN_IF_ERROR(ValidateSamplingParams(o.sampling));
  TG_RETURN_IF_ERROR(ValidateStops(o.stop));
  TG_RETURN_IF_ERROR(ValidateSpeculationOptions(o.speculation));
  if (o.method == DecodingMethod::kBeam) {
    BeamSearchOptions b = o.beam;
    b.max_new_tokens = o.max_new_tokens;
    TG_RETURN_IF_ERROR(ValidateBeamSearchOptions(b));
  }
  if (prompt_tokens < 1) return absl::InvalidArgumentError("prompt must hold at least one token");
  if (prompt_tokens >= n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", prompt_tokens,
                                                   " tokens does not fit the model's context of ",
                                                   n_ctx, " tokens (at most ", n_ctx - 1, ")"));
  }
  switch (o.context_overflow) {
    case ContextOverflow::kError:
      if (!o.stop_at_context_limit &&
          static_cast<int64_t>(prompt_tokens) + o.max_new_tokens > n_ctx) {
        return absl::InvalidArgumentError(absl::StrCat(
            "prompt (", prompt_tokens, " tokens) + max_new_tokens (", o.max_new_tokens,
            ") = ", int64_t{prompt_tokens} + o.max_new_tokens, " exceeds the model's context of ",
            n_ctx, " tokens; lower max_new_tokens or set context_overflow to slide"));
      }
      break;
    case ContextOverflow::kSlide:
      if (o.n_keep < 0 || o.n_keep > n_ctx / 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("n_keep must be in [0, ", n_ctx / 2, "], got ", o.n_keep));
      }
      break;
  }
  return absl::OkStatus();
}

}  // namespace textgen
