#include "engine/model/llama_model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/format/dtype.h"
#include "engine/model/moe_ffn.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/kernel_calibration.h"
#include "engine/ops/rope.h"
#include "engine/ops/threading.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

// The Linear made its own copy (converted or packed) of weights that lie in the model file's
// read-only private mapping: drop the process's pages of it, so that the file's pages do not
// count twice in the resident set (stories110M F32 under bf16 held both the 438 MB of F32 pages
// and the 219 MB copy). A later read (the tied embedding table) faults them back in from the
// file, so this is safe whatever else still reads the range. Only whole pages inside the range.
void ReleaseMappedPages(const void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ops::Linear>> LlamaModel::MakeLinear(const WeightSource& source,
                                                                    const std::string& name,
                                                                    int64_t out, int64_t in,
                                                                    const ops::LinearOptions& o) {
  TG_ASSIGN_OR_RETURN(NativeTensor w, source.LoadNative(name, {out, in}));
  ops::LinearOptions options = o;
  options.copy_weights = !w.owned.empty();  // reordered rows live in a temporary
  auto linear = ops::Linear::Create(ops::WeightView{w.type, w.data, out, in}, options);
  if (!linear.ok()) {
    return absl::Status(linear.status().code(),
                        absl::StrCat("preparing ", name, ": ", linear.status().message()));
  }
  weight_bytes_ += (*linear)->streamed_bytes();
  const ops::WeightView source_view{w.type, w.data, out, in};
  if (w.owned.empty() && (*linear)->weights().data != w.data) {
    ReleaseMappedPages(w.data, source_view.bytes());
  }
  return std::move(linear).value();
}

absl::StatusOr<std::vector<std::unique_ptr<ops::Linear>>> LlamaModel::MakeSplitLinear(
    const WeightSource& source, const std::string& name, const std::vector<int64_t>& rows,
    int64_t in, const ops::LinearOptions& o) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  TG_ASSIGN_OR_RETURN(NativeTensor w, source.LoadNative(name, {total, in}));
  TG_ASSIGN_OR_RETURN(const size_t row_bytes, RowBytes(w.type, in));
  ops::LinearOptions options = o;
  options.copy_weights = !w.owned.empty();
  std::vector<std::unique_ptr<ops::Linear>> out;
  int64_t row0 = 0;
  for (int64_t r : rows) {
    const ops::WeightView view{w.type, w.data + row0 * row_bytes, r, in};
    auto linear = ops::Linear::Create(view, options);
    if (!linear.ok()) {
      return absl::Status(linear.status().code(),
                          absl::StrCat("preparing ", name, " rows [", row0, ", ", row0 + r,
                                       "): ", linear.status().message()));
    }
    weight_bytes_ += (*linear)->streamed_bytes();
    if (w.owned.empty() && (*linear)->weights().data != view.data) {
      ReleaseMappedPages(view.data, view.bytes());
    }
    out.push_back(std::move(linear).value());
    row0 += r;
  }
  return out;
}

namespace {

// An RMSNorm weight as the multiplier the norm applies (see WeightSource::norm_offset).
absl::StatusOr<std::vector<float>> LoadNorm(const WeightSource& source, const std::string& name,
                                            int64_t n) {
  TG_ASSIGN_OR_RETURN(std::vector<float> w, source.LoadF32(name, {n}));
  if (const float off = source.norm_offset(); off != 0.0f) {
    for (float& x : w) x += off;
  }
  return w;
}

}  // namespace

absl::Status LlamaModel::LoadFfn(const WeightSource& source, const std::string& p, Layer& L,
                                 const ops::LinearOptions& lo) {
  const int64_t d = config_.n_embd, ff = config_.n_ff;
  std::unique_ptr<ops::Linear> gate, up, down;
  if (config_.arch->fused_gate_up) {
    TG_ASSIGN_OR_RETURN(auto gate_up,
                        MakeSplitLinear(source, p + "ffn_up.weight", {ff, ff}, d, lo));
    gate = std::move(gate_up[0]);
    up = std::move(gate_up[1]);
  } else {
    TG_ASSIGN_OR_RETURN(gate, MakeLinear(source, p + "ffn_gate.weight", ff, d, lo));
    TG_ASSIGN_OR_RETURN(up, MakeLinear(source, p + "ffn_up.weight", ff, d, lo));
  }
  TG_ASSIGN_OR_RETURN(down, MakeLinear(source, p + "ffn_down.weight", d, ff, lo));
  L.ffn = std::make_unique<DenseFfn>(config_.arch->ffn_act, std::move(gate), std::move(up),
                                     std::move(down));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::unique_ptr<ops::Linear>>> LlamaModel::MakeExpertLinears(
    const WeightSource& source, const std::string& name, int64_t out, int64_t in,
    const ops::LinearOptions& o) {
  const MoeConfig& m = config_.moe;
  ops::LinearOptions options = o;
  // The row kernels whatever the row count: an expert sees a step's tokens divided among the
  // experts (a 128-token prompt gives Qwen3-30B-A3B's experts ~8 rows each), where oneDNN's
  // per-call cost dominated (prefill 55 tok/s against 129 on the 2-layer shape, AVX2 EPYC);
  // it also keeps each token's expert outputs batch invariant in every mode.
  options.batch_invariant = true;
  std::vector<std::unique_ptr<ops::Linear>> experts;
  size_t bytes = 0;
  for (int64_t e = 0; e < m.n_expert; ++e) {
    // A view into the mapped stack (GGUF) or the expert's own mapped tensor (Hugging Face).
    TG_ASSIGN_OR_RETURN(NativeTensor w, source.LoadExpert(name, e, m.n_expert, {out, in}));
    options.copy_weights = !w.owned.empty();
    const ops::WeightView view{w.type, w.data, out, in};
    auto linear = ops::Linear::Create(view, options);
    if (!linear.ok()) {
      return absl::Status(linear.status().code(), absl::StrCat("preparing ", name, " expert ", e,
                                                               ": ", linear.status().message()));
    }
    bytes += (*linear)->streamed_bytes();
    if (w.owned.empty() && (*linear)->weights().data != view.data) {
      ReleaseMappedPages(view.data, view.bytes());
    }
    experts.push_back(std::move(linear).value());
  }
  weight_bytes_ += bytes / m.n_expert * m.n_expert_used;
  return experts;
}

absl::Status LlamaModel::LoadMoe(const WeightSource& source, const std::string& p, Layer& L,
                                 const ops::LinearOptions& lo) {
  const MoeConfig& m = config_.moe;
  const int64_t d = config_.n_embd, ff = m.n_ff_expert;
  MoeWeights w;
  // The router stays F32 with exact compute whatever --compute says: it is tiny next to one
  // expert, and rounding its logits could flip a near-tie between two experts.
  ops::LinearOptions router = lo;
  router.compute = ops::LinearCompute::kF32;
  TG_ASSIGN_OR_RETURN(w.router,
                      MakeLinear(source, p + "ffn_gate_inp.weight", m.n_expert, d, router));
  TG_ASSIGN_OR_RETURN(w.gate, MakeExpertLinears(source, p + "ffn_gate_exps.weight", ff, d, lo));
  TG_ASSIGN_OR_RETURN(w.up, MakeExpertLinears(source, p + "ffn_up_exps.weight", ff, d, lo));
  TG_ASSIGN_OR_RETURN(w.down, MakeExpertLinears(source, p + "ffn_down_exps.weight", d, ff, lo));
  if (m.biases) {
    TG_ASSIGN_OR_RETURN(w.router_bias, source.LoadF32(p + "ffn_gate_inp.bias", {m.n_expert}));
    TG_ASSIGN_OR_RETURN(w.gate_bias, source.LoadF32(p + "ffn_gate_exps.bias", {m.n_expert, ff}));
    TG_ASSIGN_OR_RETURN(w.up_bias, source.LoadF32(p + "ffn_up_exps.bias", {m.n_expert, ff}));
    TG_ASSIGN_OR_RETURN(w.down_bias, source.LoadF32(p + "ffn_down_exps.bias", {m.n_expert, d}));
  }
  if (config_.arch->moe_shared_expert) {
    const int64_t sh = m.n_ff_shared;
    TG_ASSIGN_OR_RETURN(w.shared_gate, MakeLinear(source, p + "ffn_gate_shexp.weight", sh, d, lo));
    TG_ASSIGN_OR_RETURN(w.shared_up, MakeLinear(source, p + "ffn_up_shexp.weight", sh, d, lo));
    TG_ASSIGN_OR_RETURN(w.shared_down, MakeLinear(source, p + "ffn_down_shexp.weight", d, sh, lo));
    TG_ASSIGN_OR_RETURN(w.shared_gate_inp, source.LoadF32(p + "ffn_gate_inp_shexp.weight", {d}));
  }
  L.ffn = std::make_unique<MoeFfn>(m, d, std::move(w));
  return absl::OkStatus();
}

absl::Status LlamaModel::LoadLayer(const WeightSource& source, int l,
                                   const ops::LinearOptions& lo) {
  const ModelConfig& c = config_;
  const ArchSpec& arch = *c.arch;
  const int64_t d = c.n_embd, hd = c.head_dim;
  const int64_t q_dim = int64_t{c.n_heads} * hd;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * hd;
  Layer& L = layers_[l];
  const std::string p = absl::StrCat("blk.", l, ".");
  if (arch.pre_norms) {
    TG_ASSIGN_OR_RETURN(L.attn_norm, LoadNorm(source, p + "attn_norm.weight", d));
    TG_ASSIGN_OR_RETURN(L.ffn_norm, LoadNorm(source, p + arch.ffn_norm, d));
  }
  if (arch.fused_qkv) {
    TG_ASSIGN_OR_RETURN(
        auto qkv, MakeSplitLinear(source, p + "attn_qkv.weight", {q_dim, kv_dim, kv_dim}, d, lo));
    L.wq = std::move(qkv[0]);
    L.wk = std::move(qkv[1]);
    L.wv = std::move(qkv[2]);
  } else {
    TG_ASSIGN_OR_RETURN(L.wq, MakeLinear(source, p + "attn_q.weight", q_dim, d, lo));
    TG_ASSIGN_OR_RETURN(L.wk, MakeLinear(source, p + "attn_k.weight", kv_dim, d, lo));
    TG_ASSIGN_OR_RETURN(L.wv, MakeLinear(source, p + "attn_v.weight", kv_dim, d, lo));
  }
  if (arch.qkv_bias) {
    TG_ASSIGN_OR_RETURN(L.bq, source.LoadF32(p + "attn_q.bias", {q_dim}));
    TG_ASSIGN_OR_RETURN(L.bk, source.LoadF32(p + "attn_k.bias", {kv_dim}));
    TG_ASSIGN_OR_RETURN(L.bv, source.LoadF32(p + "attn_v.bias", {kv_dim}));
  }
  if (arch.qk_norm) {
    TG_ASSIGN_OR_RETURN(
        L.q_norm, LoadNorm(source, p + "attn_q_norm.weight", arch.qk_norm_whole ? q_dim : hd));
    TG_ASSIGN_OR_RETURN(
        L.k_norm, LoadNorm(source, p + "attn_k_norm.weight", arch.qk_norm_whole ? kv_dim : hd));
  }
  TG_ASSIGN_OR_RETURN(L.wo, MakeLinear(source, p + "attn_output.weight", d, q_dim, lo));
  if (arch.out_bias) {
    TG_ASSIGN_OR_RETURN(L.bo, source.LoadF32(p + "attn_output.bias", {d}));
  }
  if (arch.attn_sinks) {
    TG_ASSIGN_OR_RETURN(L.sinks, source.LoadF32(p + "attn_sinks.weight", {c.n_heads}));
    for (float x : L.sinks) {
      if (!std::isfinite(x)) {
        return absl::InvalidArgumentError(
            absl::StrCat(p, "attn_sinks.weight holds a non-finite value (", x, ")"));
      }
    }
  }
  if (arch.post_norms) {
    TG_ASSIGN_OR_RETURN(L.post_attn_norm, LoadNorm(source, p + "post_attention_norm.weight", d));
    TG_ASSIGN_OR_RETURN(L.post_ffn_norm, LoadNorm(source, p + "post_ffw_norm.weight", d));
  }
  TG_RETURN_IF_ERROR(c.is_moe() ? LoadMoe(source, p, L, lo) : LoadFfn(source, p, L, lo));

  // RoPE of this layer: sliding-window layers may have their own base and scale (Gemma 3).
  const bool swa = c.IsSwaLayer(l);
  L.window = swa ? c.sliding_window : 0;
  ops::RopeConfig r;
  r.head_dim = hd;
  r.rope_dim = c.rope_dim;
  r.freq_base = swa ? c.rope_base_swa : c.rope_base;
  r.freq_scale = swa ? c.rope_freq_scale_swa : c.rope_freq_scale;
  r.neox = arch.rope_neox;
  r.freq_factors = rope_factors_.empty() ? nullptr : rope_factors_.data();
  r.attn_factor = c.rope_attn_factor;
  if (c.rope_yarn) {
    r.yarn_orig_ctx = c.n_ctx_orig;
    r.yarn_beta_fast = c.yarn_beta_fast;
    r.yarn_beta_slow = c.yarn_beta_slow;
  }
  L.rope_q = r;
  L.rope_q.n_heads = c.n_heads;
  L.rope_k = r;
  L.rope_k.n_heads = c.n_kv_heads;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelConfig& config,
                                                               const WeightSource& source,
                                                               const LlamaModelOptions& options) {
  TG_RETURN_IF_ERROR(config.Validate());
  if (options.n_ctx < 0 || options.n_ctx > config.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("context length ", options.n_ctx,
                                                   " is outside [1, ", config.n_ctx,
                                                   "] (the model's trained context)"));
  }
  auto m = std::unique_ptr<LlamaModel>(new LlamaModel(config));
  if (options.n_ctx > 0) m->config_.n_ctx = options.n_ctx;
  // Longrope picks its factors once, from the context this model serves (as llama.cpp does).
  m->rope_factors_ = RopeFactorsFor(config, m->config_.n_ctx);
  const int64_t d = config.n_embd, vocab = config.n_vocab;
  const ops::LinearOptions& lo = options.linear;

  TG_ASSIGN_OR_RETURN(m->token_embd_, source.LoadNative("token_embd.weight", {vocab, d}));
  TG_ASSIGN_OR_RETURN(m->token_embd_row_bytes_, RowBytes(m->token_embd_.type, d));
  TG_ASSIGN_OR_RETURN(m->output_norm_, LoadNorm(source, "output_norm.weight", d));
  const std::string output_name =
      source.Has("output.weight") ? "output.weight" : "token_embd.weight";
  TG_ASSIGN_OR_RETURN(m->output_, m->MakeLinear(source, output_name, vocab, d, lo));

  m->layers_.resize(config.n_layers);
  for (int l = 0; l < config.n_layers; ++l) TG_RETURN_IF_ERROR(m->LoadLayer(source, l, lo));
  if (lo.compute == ops::LinearCompute::kBf16) m->CalibrateKernels(options.kernel_select);
  return m;
}

void LlamaModel::CalibrateKernels(std::optional<ops::KernelSelectMode> mode) const {
  // The decode matmuls in the order a step reads them (kernel_calibration.h).
  std::vector<ops::WeightView> weights;
  for (const Layer& layer : layers_) {
    for (const ops::Linear* w : {layer.wq.get(), layer.wk.get(), layer.wv.get(), layer.wo.get()}) {
      weights.push_back(w->weights());
    }
    layer.ffn->DecodeWeights(&weights);
  }
  weights.push_back(output_->weights());
  ops::CalibrationOptions options;
  options.mode = mode;
  options.cache_path = ops::DefaultKernelCachePath();
  ops::CalibrateKernels(weights, options);
}

absl::StatusOr<int64_t> LlamaModel::BeginPass(KvCache& cache, absl::Span<ForwardSeq> seqs) {
  const ModelConfig& c = config_;
  // Validate everything before touching the cache.
  int64_t total = 0, rows = 0, blocks_needed = 0;
  for (const ForwardSeq& s : seqs) {
    if (s.table == nullptr || s.tokens.empty()) {
      return absl::InvalidArgumentError("forward: every sequence needs a table and tokens");
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= c.n_vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " is outside the vocabulary [0, ", c.n_vocab, ")"));
      }
    }
    if (s.pos0 < 0) return absl::InvalidArgumentError("forward: negative position");
    total += static_cast<int64_t>(s.tokens.size());
    if (s.logits) rows += s.all_logits ? static_cast<int64_t>(s.tokens.size()) : 1;
    blocks_needed += cache.BlocksNeeded(*s.table, static_cast<int>(s.tokens.size()));
  }
  s_.total = total;
  if (total == 0) return rows;
  if (blocks_needed > cache.num_free_blocks()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache pool exhausted: this step needs ", blocks_needed, " blocks, ",
                     cache.num_free_blocks(), " of ", cache.num_total_blocks(), " are free"));
  }
  for (ForwardSeq& s : seqs) {
    absl::Status st = cache.Append(*s.table, static_cast<int>(s.tokens.size()));
    // Cannot fail after the check above (the tables are distinct); keep the guard honest.
    if (!st.ok()) return st;
  }
  return rows;
}

template <typename Fn>
void LlamaModel::ByRows(Fn&& fn) {
  // Element-wise ops split by token rows across the threads for prefill-sized passes; below
  // that a fork/join costs more than the work (decode: one row per sequence).
  const int64_t total = s_.total;
  ops::ParallelFor(total, 1, total >= 32 ? ops::NumThreads() : 1, fn);
}

void LlamaModel::Embed(absl::Span<const ForwardSeq> seqs) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  Scratch& s = s_;
  const int64_t total = s.total;
  s.x.resize(total * d);
  s.xn.resize(total * d);
  s.q.resize(total * q_dim);
  s.k.resize(total * kv_dim);
  s.v.resize(total * kv_dim);
  s.attn.resize(total * q_dim);
  s.proj.resize(total * d);
  s.pos.resize(total);
  // Embeddings and positions, sequence after sequence.
  const float embed_scale = c.arch->embed_scale ? std::sqrt(static_cast<float>(d)) : 1.0f;
  int64_t row = 0;
  for (const ForwardSeq& fs : seqs) {
    for (size_t i = 0; i < fs.tokens.size(); ++i, ++row) {
      ToF32(token_embd_.type, token_embd_.data + fs.tokens[i] * token_embd_row_bytes_,
            &s.x[row * d], d);
      if (embed_scale != 1.0f) {
        for (int64_t j = 0; j < d; ++j) s.x[row * d + j] *= embed_scale;
      }
      s.pos[row] = fs.pos0 + static_cast<int32_t>(i);
    }
  }
}

absl::Status LlamaModel::AttentionBlock(KvCache& cache, absl::Span<ForwardSeq> seqs, int l) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd, total = s_.total;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  Layer& L = layers_[l];
  Scratch& s = s_;
  // x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)); without pre-norms (OLMo 2) the
  // projections read x itself.
  const float* in = s.x.data();
  if (!L.attn_norm.empty()) {
    ByRows([&](int64_t r0, int64_t r1) {
      ops::RmsNorm(&s.x[r0 * d], r1 - r0, d, L.attn_norm.data(), c.rms_eps, &s.xn[r0 * d]);
    });
    in = s.xn.data();
  }
  TG_RETURN_IF_ERROR(L.wq->Forward(in, total, s.q.data()));
  TG_RETURN_IF_ERROR(L.wk->Forward(in, total, s.k.data()));
  TG_RETURN_IF_ERROR(L.wv->Forward(in, total, s.v.data()));
  // Per-architecture hooks before attention: biases (Qwen2), RMSNorm of each q and k head
  // (Qwen3, Gemma 3) or of each token's whole q and k (OLMo 2), then this layer's RoPE.
  ByRows([&](int64_t r0, int64_t r1) {
    const int64_t n = r1 - r0;
    if (!L.bq.empty()) {
      ops::AddBias(&s.q[r0 * q_dim], n, q_dim, L.bq.data());
      ops::AddBias(&s.k[r0 * kv_dim], n, kv_dim, L.bk.data());
      ops::AddBias(&s.v[r0 * kv_dim], n, kv_dim, L.bv.data());
    }
    if (!L.q_norm.empty()) {
      // Rows of the norms' length: a head, or a token's whole projection.
      const int64_t q_len = static_cast<int64_t>(L.q_norm.size());
      const int64_t k_len = static_cast<int64_t>(L.k_norm.size());
      ops::RmsNorm(&s.q[r0 * q_dim], n * q_dim / q_len, q_len, L.q_norm.data(), c.rms_eps,
                   &s.q[r0 * q_dim]);
      ops::RmsNorm(&s.k[r0 * kv_dim], n * kv_dim / k_len, k_len, L.k_norm.data(), c.rms_eps,
                   &s.k[r0 * kv_dim]);
    }
    ops::Rope(L.rope_q, &s.pos[r0], n, &s.q[r0 * q_dim]);
    ops::Rope(L.rope_k, &s.pos[r0], n, &s.k[r0 * kv_dim]);
  });
  TG_RETURN_IF_ERROR(Attention(cache, seqs, l));
  TG_RETURN_IF_ERROR(L.wo->Forward(s.attn.data(), total, s.proj.data()));
  // The output bias (gpt-oss), Gemma's and OLMo 2's norm of the block's output, the residual add.
  ByRows([&](int64_t r0, int64_t r1) {
    if (!L.bo.empty()) ops::AddBias(&s.proj[r0 * d], r1 - r0, d, L.bo.data());
    if (!L.post_attn_norm.empty()) {
      ops::RmsNorm(&s.proj[r0 * d], r1 - r0, d, L.post_attn_norm.data(), c.rms_eps,
                   &s.proj[r0 * d]);
    }
    ops::Add(&s.x[r0 * d], &s.proj[r0 * d], (r1 - r0) * d);
  });
  return absl::OkStatus();
}

absl::Status LlamaModel::FfnBlock(int l) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  Layer& L = layers_[l];
  Scratch& s = s_;
  // x += W_down · act(W_gate·n(x), W_up·n(x)) (ArchSpec::ffn_act) or the experts'; Gemma and
  // OLMo 2 norm the block's output before the residual add (post norms), and OLMo 2's FFN reads
  // x itself (no pre-norm).
  const float* in = s.x.data();
  if (!L.ffn_norm.empty()) {
    ByRows([&](int64_t r0, int64_t r1) {
      ops::RmsNorm(&s.x[r0 * d], r1 - r0, d, L.ffn_norm.data(), c.rms_eps, &s.xn[r0 * d]);
    });
    in = s.xn.data();
  }
  TG_RETURN_IF_ERROR(L.ffn->Forward(in, s.total, s.proj.data()));
  ByRows([&](int64_t r0, int64_t r1) {
    if (!L.post_ffn_norm.empty()) {
      ops::RmsNorm(&s.proj[r0 * d], r1 - r0, d, L.post_ffn_norm.data(), c.rms_eps, &s.proj[r0 * d]);
    }
    ops::Add(&s.x[r0 * d], &s.proj[r0 * d], (r1 - r0) * d);
  });
  return absl::OkStatus();
}

absl::Status LlamaModel::Logits(absl::Span<const ForwardSeq> seqs, int64_t rows,
                                std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const int64_t d = c.n_embd;
  Scratch& s = s_;
  // Final norm and logits only for the rows that need them.
  s.last.resize(rows * d);
  int64_t row = 0, out_row = 0;
  for (const ForwardSeq& fs : seqs) {
    const int64_t n = static_cast<int64_t>(fs.tokens.size());
    if (!fs.logits) {
      row += n;
      continue;
    }
    const int64_t first = fs.all_logits ? row : row + n - 1;
    const int64_t count = fs.all_logits ? n : 1;
    std::memcpy(&s.last[out_row * d], &s.x[first * d], count * d * sizeof(float));
    out_row += count;
    row += n;
  }
  ops::RmsNorm(s.last.data(), rows, d, output_norm_.data(), c.rms_eps, s.last.data());
  logits->resize(rows * c.n_vocab);
  TG_RETURN_IF_ERROR(output_->Forward(s.last.data(), rows, logits->data()));
  if (c.final_softcap > 0.0f) ops::SoftCap(logits->data(), rows * c.n_vocab, c.final_softcap);
  return absl::OkStatus();
}

absl::Status LlamaModel::Forward(KvCache& cache, absl::Span<ForwardSeq> seqs,
                                 std::vector<float>* logits) {
  TG_ASSIGN_OR_RETURN(const int64_t rows, BeginPass(cache, seqs));
  if (s_.total == 0 || rows == 0) logits->clear();
  if (s_.total == 0) return absl::OkStatus();
  Embed(seqs);
  for (int l = 0; l < config_.n_layers; ++l) {
    TG_RETURN_IF_ERROR(AttentionBlock(cache, seqs, l));
    TG_RETURN_IF_ERROR(FfnBlock(l));
  }
  return rows == 0 ? absl::OkStatus() : Logits(seqs, rows, logits);
}

absl::Status LlamaModel::ShiftContext(KvCache& cache, absl::Span<BlockTable* const> tables,
                                      int keep_blocks, int drop_blocks) const {
  if (drop_blocks <= 0) return absl::OkStatus();
  // Count each physical block that will move, so shared ones rotate once and blocks also held
  // elsewhere are refused before anything changes.
  absl::flat_hash_map<int32_t, int> moved;
  for (const BlockTable* t : tables) {
    if (keep_blocks + drop_blocks >= t->num_blocks()) {
      return absl::FailedPreconditionError(absl::StrCat("context shift: a sequence of ",
                                                        t->num_blocks(), " blocks cannot keep ",
                                                        keep_blocks, " and drop ", drop_blocks));
    }
    for (int b = keep_blocks + drop_blocks; b < t->num_blocks(); ++b) ++moved[t->blocks[b]];
  }
  for (const auto& [block, refs] : moved) {
    if (cache.pool().RefCount(block) != refs) {
      return absl::FailedPreconditionError(
          "context shift: a moved KV block is shared outside this request");
    }
  }
  // Rotating changes the moved blocks' K: they no longer hold what a prefix names.
  for (const auto& [block, refs] : moved) cache.pool().Unpublish(block);
  for (BlockTable* t : tables) cache.DropFront(*t, drop_blocks, keep_blocks);
  const ModelConfig& c = config_;
  const int bs = cache.block_size();
  const int32_t delta = -drop_blocks * bs;
  BlockPool& pool = cache.pool();
  for (const auto& [block, refs] : moved) {
    for (int l = 0; l < c.n_layers; ++l) {
      // The layer's K^T tiles [n_kv_heads, head_dim, block_size] (KvCache::StoreKv's layout)
      // are contiguous; unused slots of a partial block rotate harmlessly. Each layer turns by
      // its own RoPE (NEOX pairs, frequency factors, Gemma 3's local base, YaRN's blended
      // frequencies): a shift is one more rotation at the same frequency per pair, so every
      // variant here shifts exactly. Sliding-window layers stay correct too: the window is
      // counted in slots, which the shift renumbers together with the positions.
      const ops::RopeConfig& kv_heads = layers_[l].rope_k;
      if (pool.type() == KvType::kBf16) {
        ops::RopeShiftTransposed(kv_heads, delta, bs, bs, pool.KeyBf16(block, l, 0));
      } else {
        ops::RopeShiftTransposed(kv_heads, delta, bs, bs, pool.Key(block, l, 0));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Attention(KvCache& cache, absl::Span<ForwardSeq> seqs, int layer) {
  const ModelConfig& c = config_;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t hd = c.head_dim;
  const int bs = cache.block_size();
  const Layer& L = layers_[layer];
  ops::AttentionShape shape{c.n_heads, c.n_kv_heads, hd, bs, c.attn_scale, c.attn_softcap};
  if (!L.sinks.empty()) shape.sinks = L.sinks.data();
  BlockPool& pool = cache.pool();
  const bool bf16 = pool.type() == KvType::kBf16;
  Scratch& s = s_;
  // First store every new token's K/V, and list one attention job per token: (row, seq, the
  // slots it sees). Then run the jobs on all threads: each reads the cache and writes only its
  // own row of s.attn, and prefill's causal rows differ in cost, so they are handed out one by
  // one (ParallelForEach). Why: attention was the largest serial part of a prefill.
  s.seq_blocks.resize(seqs.size());
  s.jobs.clear();
  int64_t row = 0, work = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const ForwardSeq& fs = seqs[si];
    const BlockTable& t = *fs.table;
    const int n = static_cast<int>(fs.tokens.size());
    const int slot0 = t.num_tokens - n;
    // Store this layer's K/V of the new tokens: k, v [n, n_kv_heads, head_dim] -> cache slots.
    for (int i = 0; i < n; ++i) {
      cache.StoreKv(t, layer, slot0 + i, &s.k[(row + i) * c.n_kv_heads * hd],
                    &s.v[(row + i) * c.n_kv_heads * hd]);
    }
    SeqBlocks& sb = s.seq_blocks[si];
    const size_t nb = t.blocks.size();
    if (bf16) {
      sb.k16.resize(nb);
      sb.v16.resize(nb);
      for (size_t b = 0; b < nb; ++b) {
        sb.k16[b] = pool.KeyBf16(t.blocks[b], layer, 0);
        sb.v16[b] = pool.ValueBf16(t.blocks[b], layer, 0);
      }
    } else {
      sb.k.resize(nb);
      sb.v.resize(nb);
      for (size_t b = 0; b < nb; ++b) {
        sb.k[b] = pool.Key(t.blocks[b], layer, 0);
        sb.v[b] = pool.Value(t.blocks[b], layer, 0);
      }
    }
    // Causal: token i sees slots [0, slot0 + i], a sliding-window layer only the last
    // `window` of them.
    for (int i = 0; i < n; ++i) {
      const int32_t n_ctx = slot0 + i + 1;
      const int32_t start = L.window > 0 ? std::max(0, n_ctx - L.window) : 0;
      s.jobs.push_back({row + i, static_cast<int32_t>(si), n_ctx, start});
      work += n_ctx - start;
    }
    row += n;
  }
  // Below ~2k (row, slot, head) triples (a few microseconds) a fork/join costs about what it
  // saves. Was 16k: beam 4 on stories110M, whose 4 decode rows stayed on one thread until ~340
  // slots, measured 3% faster per token with 2k (the worker only spun meanwhile).
  const int threads = work * c.n_heads >= (int64_t{2} << 10) ? ops::NumThreads() : 1;
  // Fewer rows than threads (one stream's decode): each row's kv heads in parts, so that its
  // attention runs on every thread instead of the caller's alone. Every head is computed as in
  // a whole-row call (PagedAttention's head ranges), so the split changes no bit.
  const int64_t rows = static_cast<int64_t>(s.jobs.size());
  const int64_t parts =
      rows < threads ? std::min<int64_t>(c.n_kv_heads, (2 * threads + rows - 1) / rows) : 1;
  std::atomic<bool> failed{false};
  ops::ParallelForEach(rows * parts, threads, [&](int64_t j) {
    const AttentionJob& job = s.jobs[j / parts];
    const int64_t part = j % parts;
    const ops::KvHeadRange heads{c.n_kv_heads * part / parts, c.n_kv_heads * (part + 1) / parts};
    const SeqBlocks& sb = s.seq_blocks[job.seq];
    const float* q = &s.q[job.row * q_dim];
    float* out = &s.attn[job.row * q_dim];
    const absl::Status st =
        bf16 ? ops::PagedAttention(shape, q, sb.k16, sb.v16, job.n_ctx, out, job.start, heads)
             : ops::PagedAttention(shape, q, sb.k, sb.v, job.n_ctx, out, job.start, heads);
    if (!st.ok()) {
      failed.store(true, std::memory_order_relaxed);
    }
  });
  // PagedAttention fails only on shapes and block lists, all derived from validated state.
  if (failed.load()) return absl::InternalError("attention: bad shape or block list");
  return absl::OkStatus();
}

}  // namespace textgen
