// The draft model of speculative decoding (--draft-model): a small model with the target's
// vocabulary, and its own KV pool, which the requests' ModelDrafters share.
#ifndef TEXTGEN_ENGINE_SCHEDULER_DRAFT_MODEL_H_
#define TEXTGEN_ENGINE_SCHEDULER_DRAFT_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace textgen {

struct DraftModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> cache;  // no prefix cache: drafters truncate their blocks in place

  // Loads `path` with `options` (the target's compute mode and threads) and a KV pool of
  // `kv_cache_mib` MiB of `kv_type`. InvalidArgument naming the file when its vocabulary is
  // not the target's (see CheckDraftVocabulary); the loader's errors otherwise.
  static absl::StatusOr<std::unique_ptr<DraftModel>> Load(const std::string& path,
                                                          const ModelOptions& options,
                                                          const Model& target, KvType kv_type,
                                                          int64_t kv_cache_mib);
};

// OK when every id means the same token text to both tokenizers (same size, same texts) and
// the draft model's logits cover no id beyond the target's; else InvalidArgument saying where
// they differ.
absl::Status CheckDraftVocabulary(const Tokenizer& target, int target_n_vocab,
                                  const Tokenizer& draft, int draft_n_vocab);

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_SCHEDULER_DRAFT_MODEL_H_
