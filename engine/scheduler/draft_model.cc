#include "engine/scheduler/draft_model.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace textgen {

absl::Status CheckDraftVocabulary(const Tokenizer& target, int target_n_vocab,
                                  const Tokenizer& draft, int draft_n_vocab) {
  if (target.vocab_size() != draft.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("its vocabulary has ", draft.vocab_size(),
                                                   " tokens, the target's ", target.vocab_size(),
                                                   ": a draft model must share the target's"));
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.TokenText(id) != draft.TokenText(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", id, " is \"", std::string(draft.TokenText(id)),
                       "\" in its vocabulary but \"", std::string(target.TokenText(id)),
                       "\" in the target's: a draft model must share the target's vocabulary"));
    }
  }
  if (draft_n_vocab > target_n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its output has ", draft_n_vocab, " rows, more than the target's ", target_n_vocab));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DraftModel>> DraftModel::Load(const std::string& path,
                                                             const ModelOptions& options,
                                                             const Model& target, KvType kv_type,
                                                             int64_t kv_cache_mib) {
  auto d = std::make_unique<DraftModel>();
  TG_ASSIGN_OR_RETURN(d->model, Model::Load(path, options));
  const ModelConfig& c = d->model->config();
  if (absl::Status st = CheckDraftVocabulary(target.tokenizer(), target.config().n_vocab,
                                             d->model->tokenizer(), c.n_vocab);
      !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("draft model ", path, ": ", st.message()));
  }
  KvCacheOptions kv;
  kv.n_layers = c.n_layers;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.type = kv_type;
  TG_ASSIGN_OR_RETURN(kv.num_blocks,
                      kv.NumBlocksForByteBudget(static_cast<size_t>(kv_cache_mib) << 20));
  TG_ASSIGN_OR_RETURN(d->cache, KvCache::Create(kv));
  return d;
}

}  // namespace textgen
