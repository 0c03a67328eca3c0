// What decoding and the scheduler need from a model: a forward pass over a batch of
// sequences on the paged KV cache, the context shift, and the configuration. Architectures
// implement it (LlamaModel holds every family in engine/model/arch.h, dense or with experts);
// nothing above the model names a concrete class.
#ifndef TEXTGEN_ENGINE_MODEL_CAUSAL_LM_H_
#define TEXTGEN_ENGINE_MODEL_CAUSAL_LM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv_cache/block_table.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/model_config.h"

namespace textgen {

// One sequence's share of a batched forward pass: `tokens` are appended to `table` (their K/V
// land in the cache) and attend to everything the table already holds.
struct ForwardSeq {
  absl::Span<const int32_t> tokens;  // [n] new tokens, n >= 1
  BlockTable* table = nullptr;       // the sequence's cache; grows by n
  int32_t pos0 = 0;                  // RoPE position of tokens[0]
  bool all_logits = false;           // logits for every token, else only the last
  // false: no logits row at all (a prompt chunk that is not the prompt's last), which skips
  // its share of the final norm and of the output matmul, the costliest op of small models.
  bool logits = true;
};

// Not thread-safe: Forward reuses scratch buffers, one caller at a time (the scheduler thread).
class CausalLm {
 public:
  virtual ~CausalLm() = default;

  // Runs `seqs` in one pass over a cache of either KvType. First appends each sequence's tokens
  // to its table (all-or-nothing: if the pool cannot fit them all, no table changes and
  // ResourceExhausted is returned), then computes. `logits` receives [rows, n_vocab]: per
  // sequence in order, one row (its last token), n rows (all_logits) or none (!logits); empty
  // when no sequence wants logits. InvalidArgument for token ids outside the vocabulary or
  // positions beyond what RoPE can represent.
  virtual absl::Status Forward(KvCache& cache, absl::Span<ForwardSeq> seqs,
                               std::vector<float>* logits) = 0;

  // Sliding window over the cache: in every table, drops `drop_blocks` whole blocks after the
  // first `keep_blocks` and re-positions the keys that moved (see LlamaModel::ShiftContext).
  // The tables must be one request's live sequences. FailedPrecondition when a moved block is
  // referenced from outside `tables` or a table has too few blocks.
  virtual absl::Status ShiftContext(KvCache& cache, absl::Span<BlockTable* const> tables,
                                    int keep_blocks, int drop_blocks) const = 0;

  virtual const ModelConfig& config() const = 0;
  // Bytes of the matmul weights a decode step streams (for a mixture of experts: the k
  // experts a token uses, not all of them).
  virtual size_t weight_bytes() const = 0;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_CAUSAL_LM_H_
