#include "engine/decoding/token_chooser.h"

#include <cstring>

namespace textgen {

absl::StatusOr<const float*> ApplyConstraint(const TokenConstraint* constraint, const float* row,
                                             int vocab, float* out) {
  if (constraint == nullptr) return row;
  std::memcpy(out, row, vocab * sizeof(float));
  if (!constraint->Mask(absl::MakeSpan(out, vocab))) {
    return absl::FailedPreconditionError(
        "the output constraint allows no token of this model's vocabulary here (a grammar "
        "needing text the vocabulary cannot spell?)");
  }
  return out;
}

}  // namespace textgen
