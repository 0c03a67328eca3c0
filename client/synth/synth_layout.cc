#include "client/synth/synth_layout.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/format/quantize.h"
#include "engine/model/arch.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

// Hyperparameters from each model's config.json (Hugging Face, 2025): hidden size, layers,
// heads, KV heads, intermediate size, context, head_dim, rope_theta, rms_norm_eps, tied.
const SynthShape kShapes[] = {
    {.name = "stories15M",
     .dim = 288,
     .layers = 6,
     .heads = 6,
     .kv_heads = 6,
     .ffn = 768,
     .ctx = 256},
    {.name = "stories42M",
     .dim = 512,
     .layers = 8,
     .heads = 8,
     .kv_heads = 8,
     .ffn = 1376,
     .ctx = 1024},
    {.name = "stories110M",
     .dim = 768,
     .layers = 12,
     .heads = 12,
     .kv_heads = 12,
     .ffn = 2048,
     .ctx = 1024},
    {.name = "tinyllama-1.1b",
     .dim = 2048,
     .layers = 22,
     .heads = 32,
     .kv_heads = 4,
     .ffn = 5632,
     .ctx = 2048},
    {.name = "llama-3.2-1b",
     .arch = "llama",
     .dim = 2048,
     .layers = 16,
     .heads = 32,
     .kv_heads = 8,
     .ffn = 8192,
     .ctx = 131072,
     .head_dim = 64,
     .rope_base = 500000.0f,
     .rms_eps = 1e-5f,
     .tied = true,
     .vocab = "ggml-vocab-llama3.1.gguf",
     .llama3_factor = 32.0f,
     .llama3_orig_ctx = 8192},
    {.name = "qwen2.5-0.5b",
     .arch = "qwen2",
     .dim = 896,
     .layers = 24,
     .heads = 14,
     .kv_heads = 2,
     .ffn = 4864,
     .ctx = 32768,
     .head_dim = 64,
     .rope_base = 1e6f,
     .rms_eps = 1e-6f,
     .tied = true,
     .vocab = "ggml-vocab-qwen3.gguf"},
    {.name = "qwen3-0.6b",
     .arch = "qwen3",
     .dim = 1024,
     .layers = 28,
     .heads = 16,
     .kv_heads = 8,
     .ffn = 3072,
     .ctx = 40960,
     .head_dim = 128,
     .rope_base = 1e6f,
     .rms_eps = 1e-6f,
     .tied = true,
     .vocab = "ggml-vocab-qwen3.gguf"},
    {.name = "phi-3.5-mini",
     .arch = "phi3",
     .dim = 3072,
     .layers = 32,
     .heads = 32,
     .kv_heads = 32,
     .ffn = 8192,
     .ctx = 131072,
     .head_dim = 96,
     .rope_base = 10000.0f,
     .rms_eps = 1e-5f,
     .tied = false,
     .vocab = "ggml-vocab-phi-3.gguf",
     .longrope_orig_ctx = 4096},
    {.name = "gemma-3-1b",
     .arch = "gemma3",
     .dim = 1152,
     .layers = 26,
     .heads = 4,
     .kv_heads = 1,
     .ffn = 6912,
     .ctx = 32768,
     .head_dim = 256,
     .rope_base = 1e6f,
     .rms_eps = 1e-6f,
     .tied = true,
     .vocab = "ggml-vocab-gemma3.gguf",
     .sliding_window = 512,
     .rope_base_swa = 10000.0f},
    // Mixtures of experts: `ffn` is config.json's intermediate_size (what GGUF's
    // feed_forward_length holds), the experts' width is moe_intermediate_size.
    {.name = "qwen3-30b-a3b",
     .arch = "qwen3moe",
     .dim = 2048,
     .layers = 48,
     .heads = 32,
     .kv_heads = 4,
     .ffn = 6144,
     .ctx = 40960,
     .head_dim = 128,
     .rope_base = 1e6f,
     .rms_eps = 1e-6f,
     .tied = false,
     .vocab = "ggml-vocab-qwen3.gguf",
     .n_expert = 128,
     .n_expert_used = 8,
     .expert_ffn = 768},
    {.name = "mixtral-8x7b",
     .arch = "llama",
     .dim = 4096,
     .layers = 32,
     .heads = 32,
     .kv_heads = 8,
     .ffn = 14336,
     .ctx = 32768,
     .rope_base = 1e6f,
     .rms_eps = 1e-5f,
     .tied = false,
     .n_expert = 8,
     .n_expert_used = 2},
    // openai/gpt-oss-20b: attention with biases and sinks, a 128-token window on the even layers,
    // YaRN x32 from 4,096 (max_position_embeddings 131,072); 32 experts of width 2,880 with
    // biases, 4 per token. Its o200k tokenizer is not among the vocab files: Qwen3's, padded.
    {.name = "gpt-oss-20b",
     .arch = "gpt-oss",
     .dim = 2880,
     .layers = 24,
     .heads = 64,
     .kv_heads = 8,
     .ffn = 2880,
     .ctx = 131072,
     .head_dim = 64,
     .rope_base = 150000.0f,
     .rms_eps = 1e-5f,
     .tied = false,
     .vocab = "ggml-vocab-qwen3.gguf",
     .vocab_size = 201088,
     .sliding_window = 128,
     .yarn_factor = 32.0f,
     .yarn_orig_ctx = 4096,
     .n_expert = 32,
     .n_expert_used = 4,
     .expert_ffn = 2880},
};

// Counter-based generator: element i of a tensor is a pure function of (seed, name, i), so
// files of different types written with one seed hold the same underlying values, and chunks
// can be generated in any order. About 1.3 ns per value (scalar), well under the cost of
// writing the bytes.
uint64_t Mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

uint64_t TensorKey(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return Mix64((seed * kGolden) ^ h);
}

constexpr float kStd = 0.02f;
// Each 16-bit uniform on {0..65535} has variance (65536^2 - 1) / 12; the sum of four has mean
// 4 * 65535 / 2 = 131070 and four times that variance.
const float kNormalScale = static_cast<float>(kStd / std::sqrt(4.0 * (65536.0 * 65536.0 - 1) / 12));

// Writes elements [first, first + n) of the tensor keyed `key` into `out` [n].
void FillNormal(uint64_t key, uint64_t first, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t z = Mix64(key + (first + static_cast<uint64_t>(i) + 1) * kGolden);
    const uint32_t sum = static_cast<uint32_t>((z & 0xffff) + ((z >> 16) & 0xffff) +
                                               ((z >> 32) & 0xffff) + (z >> 48));
    // sum < 2^18, so the int32 -> float conversion and the subtraction are exact.
    out[i] = static_cast<float>(static_cast<int32_t>(sum) - 131070) * kNormalScale;
  }
}

// A matrix [rows, cols] of `type`, generated and converted a chunk of whole rows at a time
// while the writer streams the file. The K-quant rounding searches cost ~100 ns a value, so
// each chunk is split by rows over `threads` threads (rows are independent, so the bytes do
// not depend on the split).
// `experts` > 1: a 3-D stack of that many [rows / experts, cols] matrices (GGUF dims {cols,
// rows / experts, experts}), laid out as the same rows.
absl::Status AddRandomMatrix(GgufWriter& w, const std::string& name, DType type, int64_t rows,
                             int64_t cols, uint64_t seed, int threads, int64_t experts = 1) {
  const uint64_t key = TensorKey(seed, name);
  TG_ASSIGN_OR_RETURN(const size_t row_bytes, RowBytes(type, cols));
  GgufTensorFiller fill = [=](GgufTensorSink& sink) -> absl::Status {
    const int64_t rows_per_thread = std::max<int64_t>(1, (int64_t{1} << 18) / cols);
    const int64_t chunk_rows = rows_per_thread * threads;
    std::vector<float> values;   // [chunk_rows, cols]
    std::vector<uint8_t> bytes;  // [chunk_rows, row_bytes]
    for (int64_t r = 0; r < rows; r += chunk_rows) {
      const int64_t n_rows = std::min(chunk_rows, rows - r);
      values.resize(n_rows * cols);
      bytes.resize(n_rows * row_bytes);
      // Rows [first, first + count) of this chunk.
      auto convert = [&](int64_t first, int64_t count) {
        float* v = values.data() + first * cols;
        FillNormal(key, static_cast<uint64_t>((r + first) * cols), v, count * cols);
        return FromF32(type, absl::MakeConstSpan(v, count * cols),
                       absl::MakeSpan(bytes.data() + first * row_bytes, count * row_bytes));
      };
      const int64_t per = (n_rows + threads - 1) / threads;
      std::vector<absl::Status> status(threads);
      std::vector<std::thread> workers;
      for (int t = 1; t < threads && t * per < n_rows; ++t) {
        workers.emplace_back(
            [&, t] { status[t] = convert(t * per, std::min(per, n_rows - t * per)); });
      }
      status[0] = convert(0, std::min(per, n_rows));
      for (std::thread& th : workers) th.join();
      for (const absl::Status& st : status) TG_RETURN_IF_ERROR(st);
      TG_RETURN_IF_ERROR(sink.Append(bytes.data(), bytes.size()));
    }
    return absl::OkStatus();
  };
  std::vector<int64_t> dims = {cols, rows};
  if (experts > 1) dims = {cols, rows / experts, experts};
  return w.AddTensor(name, type, std::move(dims), std::move(fill));
}

absl::Status AddVector(GgufWriter& w, const std::string& name, const std::vector<float>& v) {
  return w.AddTensor(
      name, DType::kF32, {static_cast<int64_t>(v.size())},
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)));
}

// Phi-3.5's longrope factors rise smoothly over the dimensions: the short ones stay near 1, the
// long ones reach tens for the slowest frequencies. Only their shape matters for speed.
std::vector<float> LongropeFactors(int half, bool long_factors) {
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i) {
    const float t = static_cast<float>(i) / std::max(1, half - 1);
    f[i] = long_factors ? 1.0f + 63.0f * t * t : 1.0f + 0.1f * t;
  }
  return f;
}

// The engine's table of the shape's architecture (engine/model/families/): which tensors a
// layer has follows from it. ValidateSynthShape checks the name first.
const ArchSpec& Arch(const SynthShape& s) {
  const ArchSpec* a = FindArchByGguf(s.arch);
  return a != nullptr ? *a : *FindArchByGguf("llama");
}

// A layer's experts as llama.cpp lays them out: the router (F32: llama-quantize never
// quantizes ffn_gate_inp) and the 3-D gate/up/down stacks; gpt-oss adds F32 biases to the
// router ([e]) and to each expert's projections ([e, ff] / [e, d], GGUF dims {ff, e} / {d, e};
// llama-quantize leaves *.bias alone).
absl::Status AddExperts(GgufWriter& w, const SynthShape& s, const std::string& p,
                        const SynthTypeFn& type_of, uint64_t seed, int threads,
                        SynthTotals* totals) {
  const int64_t d = s.dim, ff = s.ExpertFfn(), e = s.n_expert;
  const bool biases = Arch(s).moe_biases;
  totals->params += e * d + 3 * e * ff * d + (biases ? e + 2 * e * ff + e * d : 0);
  TG_RETURN_IF_ERROR(
      AddRandomMatrix(w, p + "ffn_gate_inp.weight", DType::kF32, e, d, seed, threads));
  if (biases) {
    std::vector<float> b(e);
    FillNormal(TensorKey(seed, p + "ffn_gate_inp.bias"), 0, b.data(), e);
    TG_RETURN_IF_ERROR(AddVector(w, p + "ffn_gate_inp.bias", b));
  }
  for (const char* name : {"ffn_gate_exps", "ffn_up_exps"}) {
    const std::string weight = p + name + ".weight";
    TG_RETURN_IF_ERROR(AddRandomMatrix(w, weight, type_of(weight, d), e * ff, d, seed, threads, e));
    if (biases) {
      TG_RETURN_IF_ERROR(AddRandomMatrix(w, p + name + ".bias", DType::kF32, e, ff, seed, threads));
    }
  }
  const std::string down = p + "ffn_down_exps.weight";
  TG_RETURN_IF_ERROR(AddRandomMatrix(w, down, type_of(down, ff), e * d, ff, seed, threads, e));
  if (biases) {
    TG_RETURN_IF_ERROR(
        AddRandomMatrix(w, p + "ffn_down_exps.bias", DType::kF32, e, d, seed, threads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const SynthShape> SynthShapes() { return kShapes; }

absl::Status ValidateSynthShape(const SynthShape& s, DType type) {
  if (std::find(std::begin(kSynthArchs), std::end(kSynthArchs), s.arch) == std::end(kSynthArchs) ||
      FindArchByGguf(s.arch) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arch: unknown architecture '", s.arch,
                     "' (expected llama, qwen2, qwen3, phi3, gemma3, qwen3moe or gpt-oss)"));
  }
  if (s.n_expert < 0 || s.n_expert_used < 0 || s.n_expert_used > s.n_expert ||
      (s.n_expert > 0) != (s.n_expert_used > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--experts-used: ", s.n_expert_used,
                                                   " must be in [1, --experts ", s.n_expert, "]"));
  }
  const bool moe_only = Arch(s).moe == MoeUse::kAlways;
  if (moe_only && s.n_expert == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--experts: ", s.arch, " needs experts"));
  }
  if (s.n_expert > 0 && Arch(s).moe == MoeUse::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--experts: the ", s.arch, " layout has no experts (llama, qwen3moe and gpt-oss do)"));
  }
  if (s.head_dim == 0 && s.dim % s.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heads: ", s.heads, " does not divide --dim ", s.dim));
  }
  if (s.heads % s.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-heads: ", s.kv_heads, " does not divide --heads ", s.heads));
  }
  if (s.HeadDim() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heads: head size ", s.HeadDim(), " must be even for RoPE"));
  }
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBf16) {
    // Quantized blocks (32 values at least) run along rows: dim for most matrices, heads *
    // head size for attn_output, ffn for ffn_down. Rows that fit 32 but not a 256-value
    // super-block take the mix's fallback type (quant_mix.h).
    const struct {
      const char* flag;
      int64_t n;
    } rows[] = {{"--dim", s.dim},
                {"--heads", int64_t{s.heads} * s.HeadDim()},
                {"--ffn", s.ffn},
                {"--expert-ffn", s.ExpertFfn()}};
    for (const auto& r : rows) {
      if (r.n % kQ8_0BlockSize != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(r.flag, ": rows of ", r.n, " values must be a multiple of 32 for --type ",
                         absl::AsciiStrToLower(std::string(DTypeName(type))),
                         " (quantized blocks do not straddle rows)"));
      }
    }
  }
  return absl::OkStatus();
}

void SetSynthHyperparameters(GgufWriter& w, const SynthShape& s, int64_t n_vocab) {
  const std::string a = s.arch + ".";
  const uint32_t hd = static_cast<uint32_t>(s.HeadDim());
  w.SetUint32(a + "context_length", s.ctx);
  w.SetUint32(a + "embedding_length", s.dim);
  w.SetUint32(a + "block_count", s.layers);
  w.SetUint32(a + "feed_forward_length", s.ffn);
  w.SetUint32(a + "attention.head_count", s.heads);
  w.SetUint32(a + "attention.head_count_kv", s.kv_heads);
  w.SetFloat32(a + "rope.freq_base", s.rope_base);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  // Keys only some converters write (convert_hf_to_gguf.py per model class), not layout: by name.
  if (s.arch == "llama" || s.arch == "phi3") w.SetUint32(a + "rope.dimension_count", hd);
  if (s.arch == "llama") w.SetUint32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  if (s.head_dim > 0) {
    w.SetUint32(a + "attention.key_length", hd);
    w.SetUint32(a + "attention.value_length", hd);
  }
  if (s.longrope_orig_ctx > 0) {
    w.SetUint32(a + "rope.scaling.original_context_length", s.longrope_orig_ctx);
    // What the converter writes for longrope: sqrt(1 + ln(ctx / orig) / ln(orig)).
    const double scale = static_cast<double>(s.ctx) / s.longrope_orig_ctx;
    w.SetFloat32(
        a + "rope.scaling.attn_factor",
        static_cast<float>(std::sqrt(1 + std::log(scale) / std::log(s.longrope_orig_ctx))));
  }
  if (s.yarn_factor > 0) {
    // What the converter writes for rope_scaling {yarn, factor, beta_fast 32, beta_slow 1}.
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetFloat32(a + "rope.scaling.factor", s.yarn_factor);
    w.SetUint32(a + "rope.scaling.original_context_length", s.yarn_orig_ctx);
    w.SetFloat32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    w.SetFloat32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  }
  if (s.n_expert > 0) {
    w.SetUint32(a + "expert_count", s.n_expert);
    w.SetUint32(a + "expert_used_count", s.n_expert_used);
    // gpt-oss's loader requires the key; its converter writes it always.
    if (s.expert_ffn > 0 || s.arch == "gpt-oss") {
      w.SetUint32(a + "expert_feed_forward_length", s.ExpertFfn());
    }
  }
  if (s.sliding_window > 0) {
    w.SetUint32(a + "attention.sliding_window", s.sliding_window);
    if (Arch(s).reads_swa_rope_base) w.SetFloat32(a + "rope.freq_base_swa", s.rope_base_swa);
  }
}

std::vector<float> Llama3RopeFactors(int head_dim, float base, float factor, int orig_ctx) {
  constexpr double kLow = 1.0, kHigh = 4.0;  // low_freq_factor, high_freq_factor
  const double low_wavelen = orig_ctx / kLow, high_wavelen = orig_ctx / kHigh;
  std::vector<float> f(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      f[i] = 1.0f;
    } else if (wavelen > low_wavelen) {
      f[i] = factor;
    } else {
      const double smooth = (orig_ctx / wavelen - kLow) / (kHigh - kLow);
      f[i] = static_cast<float>(1.0 / ((1 - smooth) / factor + smooth));
    }
  }
  return f;
}

absl::Status AddSynthTensors(GgufWriter& w, const SynthShape& s, DType type, int64_t n_vocab,
                             uint64_t seed, SynthTotals* totals, int threads) {
  return AddSynthTensors(
      w, s, [type](std::string_view, int64_t) { return type; }, n_vocab, seed, totals, threads);
}

absl::Status AddSynthTensors(GgufWriter& w, const SynthShape& s, const SynthTypeFn& type_of,
                             int64_t n_vocab, uint64_t seed, SynthTotals* totals, int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const ArchSpec& arch = Arch(s);
  const int64_t d = s.dim, ff = s.ffn, hd = s.HeadDim();
  const int64_t q_dim = int64_t{s.heads} * hd, kv_dim = int64_t{s.kv_heads} * hd;
  // Matrices are [out, in] (rows of `in` values), as the engine loads them.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    totals->params += rows * cols;
    return AddRandomMatrix(w, name, type_of(name, cols), rows, cols, seed, threads);
  };
  auto vec = [&](const std::string& name, std::vector<float> v) {
    totals->params += static_cast<int64_t>(v.size());
    return AddVector(w, name, v);
  };
  auto ones = [&](const std::string& name, int64_t n) {
    return vec(name, std::vector<float>(n, 1.0f));
  };
  auto bias = [&](const std::string& name, int64_t n) {
    std::vector<float> b(n);
    FillNormal(TensorKey(seed, name), 0, b.data(), n);
    return vec(name, std::move(b));
  };

  if (s.llama3_factor > 0) {
    TG_RETURN_IF_ERROR(vec("rope_freqs.weight",
                           Llama3RopeFactors(hd, s.rope_base, s.llama3_factor, s.llama3_orig_ctx)));
  }
  if (s.longrope_orig_ctx > 0) {
    TG_RETURN_IF_ERROR(vec("rope_factors_long.weight", LongropeFactors(hd / 2, true)));
    TG_RETURN_IF_ERROR(vec("rope_factors_short.weight", LongropeFactors(hd / 2, false)));
  }
  // Forward-pass order, so a cold mmap reads the file front to back.
  TG_RETURN_IF_ERROR(matrix("token_embd.weight", n_vocab, d));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    if (arch.pre_norms) TG_RETURN_IF_ERROR(ones(p + "attn_norm.weight", d));
    if (arch.fused_qkv) {
      TG_RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, d));
    } else {
      TG_RETURN_IF_ERROR(matrix(p + "attn_q.weight", q_dim, d));
      TG_RETURN_IF_ERROR(matrix(p + "attn_k.weight", kv_dim, d));
      TG_RETURN_IF_ERROR(matrix(p + "attn_v.weight", kv_dim, d));
    }
    if (arch.qkv_bias) {
      TG_RETURN_IF_ERROR(bias(p + "attn_q.bias", q_dim));
      TG_RETURN_IF_ERROR(bias(p + "attn_k.bias", kv_dim));
      TG_RETURN_IF_ERROR(bias(p + "attn_v.bias", kv_dim));
    }
    if (arch.qk_norm) {
      TG_RETURN_IF_ERROR(ones(p + "attn_q_norm.weight", arch.qk_norm_whole ? q_dim : hd));
      TG_RETURN_IF_ERROR(ones(p + "attn_k_norm.weight", arch.qk_norm_whole ? kv_dim : hd));
    }
    TG_RETURN_IF_ERROR(matrix(p + "attn_output.weight", d, q_dim));
    if (arch.out_bias) TG_RETURN_IF_ERROR(bias(p + "attn_output.bias", d));
    if (arch.attn_sinks) TG_RETURN_IF_ERROR(bias(p + "attn_sinks.weight", s.heads));  // per head
    if (arch.post_norms) TG_RETURN_IF_ERROR(ones(p + "post_attention_norm.weight", d));
    // gpt-oss's pre-FFN norm carries the name Gemma's post-attention norm has (ArchSpec::ffn_norm).
    if (arch.pre_norms) TG_RETURN_IF_ERROR(ones(p + arch.ffn_norm, d));
    if (s.n_expert > 0) {
      TG_RETURN_IF_ERROR(AddExperts(w, s, p, type_of, seed, threads, totals));
    } else if (arch.fused_gate_up) {
      TG_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", 2 * ff, d));  // gate rows, then up rows
    } else {
      TG_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", ff, d));
      TG_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", ff, d));
    }
    if (s.n_expert == 0) TG_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", d, ff));
    if (arch.post_norms) TG_RETURN_IF_ERROR(ones(p + "post_ffw_norm.weight", d));
  }
  TG_RETURN_IF_ERROR(ones("output_norm.weight", d));
  if (!s.tied) TG_RETURN_IF_ERROR(matrix("output.weight", n_vocab, d));
  return absl::OkStatus();
}

}  // namespace textgen
