// The causal-LM forward pass over a batch of sequences on the paged KV cache, for every
// architecture in engine/model/arch.h: the Llama block, with each architecture's differences
// (biases, q/k norms, fused projections, NEOX / scaled / YaRN RoPE, Gemma's norms, GeGLU,
// soft-caps, sliding-window layers, attention sinks, experts) switched on by its ArchSpec and
// ModelConfig.
#ifndef TEXTGEN_ENGINE_MODEL_LLAMA_MODEL_H_
#define TEXTGEN_ENGINE_MODEL_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv_cache/block_table.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/model/causal_lm.h"
#include "engine/model/feed_forward.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_source.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/linear.h"
#include "engine/ops/rope.h"

namespace textgen {

struct LlamaModelOptions {
  ops::LinearOptions linear;
  // Context length to serve, at most the trained one (config n_ctx); 0 = the trained length.
  // A shorter context bounds each sequence's KV cache and, with the sliding window, the work
  // per token (llama.cpp's -c).
  int n_ctx = 0;
  // How the kernel level of each weight format is chosen after loading (--kernel-select;
  // ops/kernel_calibration.h); unset: TEXTGEN_KERNEL_SELECT, else measure.
  std::optional<ops::KernelSelectMode> kernel_select;
};

// Owns the prepared weights (norm vectors, Linear operators). Forward is not reentrant (it
// reuses scratch buffers): one caller at a time, e.g. the scheduler thread.
class LlamaModel : public CausalLm {
 public:
  // Reads every tensor from `source`, checks shapes against `config`, and prepares the matmuls
  // on the weights at their stored type (borrowed from the source's mapping, which must outlive
  // the model, unless options.linear converts them). Errors name the missing or mismatched
  // tensor.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const ModelConfig& config,
                                                            const WeightSource& source,
                                                            const LlamaModelOptions& options);

  // Runs `seqs` in one pass over a cache of either KvType (a BF16 cache stores K/V rounded to
  // nearest even; attention widens them back). First appends each sequence's tokens to its table
  // (all-or-nothing: if the pool cannot fit them all, no table changes and ResourceExhausted is
  // returned), then computes. `logits` receives [rows, n_vocab]: per sequence in order, one row
  // (its last token), n rows (all_logits) or none (!logits); empty when no sequence wants logits.
  // InvalidArgument for token ids outside the vocabulary or
  // positions beyond what RoPE can represent.
  absl::Status Forward(KvCache& cache, absl::Span<ForwardSeq> seqs,
                       std::vector<float>* logits) override;

  // Sliding window over the cache: in every table, drops `drop_blocks` whole blocks after the
  // first `keep_blocks`, then re-rotates the keys that moved down by drop_blocks * block_size
  // slots so that RoPE positions equal slots again (RoPE is a rotation, so a shift is one more
  // rotation; a BF16 cache's keys are widened, rotated and rounded). The tables must be one
  // request's live sequences (e.g. its beams, all of equal
  // length); a block they share is rotated once. FailedPrecondition if a moved block is also
  // referenced from outside `tables` (rotating it would corrupt that reader) or too few blocks.
  absl::Status ShiftContext(KvCache& cache, absl::Span<BlockTable* const> tables, int keep_blocks,
                            int drop_blocks) const override;

  const ModelConfig& config() const override { return config_; }
  // Bytes of the matmul weights as prepared: what a decode step streams (the embedding table is
  // not streamed, one row per token is read).
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  struct Layer {
    std::vector<float> attn_norm;  // [n_embd], or empty: no pre-norms (ArchSpec::pre_norms)
    std::vector<float> ffn_norm;   // [n_embd], or empty
    std::unique_ptr<ops::Linear> wq, wk, wv, wo;
    std::unique_ptr<FeedForward> ffn;                  // DenseFfn or MoeFfn
    std::vector<float> bq, bk, bv;                     // [q_dim], [kv_dim] x2, or empty
    std::vector<float> bo;                             // [n_embd] or empty
    std::vector<float> sinks;                          // [n_heads] attention sinks, or empty
    std::vector<float> q_norm, k_norm;                 // [head_dim] or [q/kv_dim] each, or empty
    std::vector<float> post_attn_norm, post_ffn_norm;  // [n_embd] each, or empty
    ops::RopeConfig rope_q, rope_k;                    // this layer's RoPE (Gemma 3: per layer)
    int window = 0;                                    // sliding window, 0 = global layer
  };
  // One sequence's cache blocks of the current layer, as PagedAttention reads them: k, v for
  // an F32 cache, k16, v16 for a BF16 one.
  struct SeqBlocks {
    std::vector<const float*> k, v;
    std::vector<const uint16_t*> k16, v16;
  };
  struct AttentionJob {
    int64_t row;    // token row of the pass (q and attn)
    int32_t seq;    // index into seq_blocks
    int32_t n_ctx;  // slots the token attends to: [start, n_ctx)
    int32_t start;
  };
  // Activations of one pass, reused across calls.
  struct Scratch {
    std::vector<float> x;               // [T, n_embd] residual stream
    std::vector<float> xn;              // [T, n_embd] normed input
    std::vector<float> q;               // [T, n_heads * head_dim]
    std::vector<float> k;               // [T, n_kv_heads * head_dim]
    std::vector<float> v;               // [T, n_kv_heads * head_dim]
    std::vector<float> attn;            // [T, n_heads * head_dim]
    std::vector<float> proj;            // [T, n_embd]
    std::vector<int32_t> pos;           // [T]
    std::vector<float> last;            // [rows, n_embd] rows that need logits
    std::vector<SeqBlocks> seq_blocks;  // per sequence of the pass
    std::vector<AttentionJob> jobs;     // one per token of the pass
    int64_t total = 0;                  // T: token rows of the current pass
  };

  LlamaModel(const ModelConfig& config) : config_(config) {}
  // The steps of Forward. BeginPass validates the batch and appends its tokens to the tables
  // (all-or-nothing), sets s_.total and returns the number of logits rows; Embed fills the
  // residual stream; each layer is an AttentionBlock then an FfnBlock, each adding its output
  // to s_.x; Logits normalises and projects the rows that want logits.
  absl::StatusOr<int64_t> BeginPass(KvCache& cache, absl::Span<ForwardSeq> seqs);
  void Embed(absl::Span<const ForwardSeq> seqs);
  absl::Status AttentionBlock(KvCache& cache, absl::Span<ForwardSeq> seqs, int layer);
  absl::Status FfnBlock(int layer);
  absl::Status Logits(absl::Span<const ForwardSeq> seqs, int64_t rows, std::vector<float>* logits);
  // Runs fn(r0, r1) over the pass's token rows, split across the threads for large passes.
  template <typename Fn>
  void ByRows(Fn&& fn);
  absl::Status Attention(KvCache& cache, absl::Span<ForwardSeq> seqs, int layer);
  absl::StatusOr<std::unique_ptr<ops::Linear>> MakeLinear(const WeightSource& source,
                                                          const std::string& name, int64_t out,
                                                          int64_t in, const ops::LinearOptions& o);
  // Linears on consecutive row ranges [rows[0]), [rows[0], rows[0] + rows[1]) ... of one fused
  // tensor (Phi-3's attn_qkv, ffn_up), viewing the stored rows without copying them when the
  // Linear keeps its weights' storage.
  absl::StatusOr<std::vector<std::unique_ptr<ops::Linear>>> MakeSplitLinear(
      const WeightSource& source, const std::string& name, const std::vector<int64_t>& rows,
      int64_t in, const ops::LinearOptions& o);
  // One Linear per expert over a 3-D [n_expert, out, in] stack, viewing each expert's slice.
  // Counts an expert's share of weight_bytes_ as decode streams it: k of n_expert.
  absl::StatusOr<std::vector<std::unique_ptr<ops::Linear>>> MakeExpertLinears(
      const WeightSource& source, const std::string& name, int64_t out, int64_t in,
      const ops::LinearOptions& o);
  absl::Status LoadFfn(const WeightSource& source, const std::string& prefix, Layer& layer,
                       const ops::LinearOptions& lo);
  absl::Status LoadMoe(const WeightSource& source, const std::string& prefix, Layer& layer,
                       const ops::LinearOptions& lo);
  absl::Status LoadLayer(const WeightSource& source, int l, const ops::LinearOptions& lo);
  // Measures (or reads from the cache) which kernel level runs each format whose levels agree
  // bit for bit (ops/kernel_calibration.h), on this model's weights; `mode` as
  // LlamaModelOptions::kernel_select.
  void CalibrateKernels(std::optional<ops::KernelSelectMode> mode) const;

  ModelConfig config_;
  NativeTensor token_embd_;  // [n_vocab, n_embd], rows widened to F32 on lookup
  size_t token_embd_row_bytes_ = 0;
  std::vector<float> output_norm_;       // [n_embd]
  std::unique_ptr<ops::Linear> output_;  // [n_vocab, n_embd]
  std::vector<Layer> layers_;
  std::vector<float> rope_factors_;  // [rope_dim / 2] or empty; the layers' RoPE configs point here
  size_t weight_bytes_ = 0;
  Scratch s_;
};

}  // namespace textgen

#endif  // TEXTGEN_ENGINE_MODEL_LLAMA_MODEL_H_
