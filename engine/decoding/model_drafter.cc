#include "engine/decoding/model_drafter.h"

#include <algorithm>

#include "engine/util/status_macros.h"

namespace textgen {
namespace {

// Prompt text is fed in chunks of at most this many tokens: bounds the draft pass's scratch
// (activations are [tokens, width]) on a long first turn.
constexpr int kMaxFeedTokens = 512;

}  // namespace

ModelDrafter::ModelDrafter(CausalLm& model, KvCache& cache) : model_(model), cache_(cache) {}

ModelDrafter::~ModelDrafter() { Reset(); }

void ModelDrafter::Reset() {
  cache_.Free(table_);
  computed_.clear();
}

absl::Status ModelDrafter::Feed(absl::Span<const int32_t> tokens, int32_t* next) {
  while (!tokens.empty()) {
    const size_t n = std::min<size_t>(tokens.size(), kMaxFeedTokens);
    const bool last = n == tokens.size();
    ForwardSeq seq;
    seq.tokens = tokens.subspan(0, n);
    seq.table = &table_;
    seq.pos0 = static_cast<int32_t>(computed_.size());
    seq.logits = last;
    TG_RETURN_IF_ERROR(model_.Forward(cache_, absl::MakeSpan(&seq, 1), &logits_));
    computed_.insert(computed_.end(), seq.tokens.begin(), seq.tokens.end());
    tokens.remove_prefix(n);
    if (last) {
      // The first of equal maxima, as the target's greedy choice breaks ties.
      const int vocab = model_.config().n_vocab;
      *next = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.begin() + vocab) -
                                   logits_.begin());
    }
  }
  return absl::OkStatus();
}

absl::Status ModelDrafter::Propose(absl::Span<const int32_t> text, int max_tokens,
                                   std::vector<int32_t>* out) {
  out->clear();
  const int64_t n_ctx = model_.config().n_ctx;
  if (text.empty() || max_tokens <= 0 || static_cast<int64_t>(text.size()) + max_tokens > n_ctx) {
    return absl::OkStatus();
  }
  // Keep the K/V of the longest common prefix, but feed at least the text's last token: its
  // logits row gives the first draft.
  size_t keep = 0;
  const size_t limit = std::min(computed_.size(), text.size() - 1);
  while (keep < limit && computed_[keep] == text[keep]) ++keep;
  cache_.Truncate(table_, static_cast<int>(keep));
  computed_.resize(keep);

  int32_t next = 0;
  absl::Status st = Feed(text.subspan(keep), &next);
  for (int i = 0; st.ok(); ++i) {
    out->push_back(next);
    if (i + 1 == max_tokens) break;
    const int32_t token = next;
    st = Feed(absl::MakeConstSpan(&token, 1), &next);
  }
  if (!st.ok()) {
    Reset();
    out->clear();
  }
  return st;
}

}  // namespace textgen
