#include "engine/decoding/speculation_options.h"

#include "absl/strings/str_cat.h"

namespace textgen {

std::string_view DraftSourceName(DraftSource s) {
  switch (s) {
    case DraftSource::kNone:
      return "none";
    case DraftSource::kNgram:
      return "ngram";
    case DraftSource::kDraftModel:
      return "draft-model";
  }
  return "unknown";
}

absl::Status ValidateSpeculationOptions(const SpeculationOptions& o) {
  if (o.max_draft_tokens < 1 || o.max_draft_tokens > kMaxSpeculativeTokens) {
    return absl::InvalidArgumentError(absl::StrCat("speculative_tokens must be in [1, ",
                                                   kMaxSpeculativeTokens, "], got ",
                                                   o.max_draft_tokens));
  }
  return absl::OkStatus();
}

}  // namespace textgen
