// The model shapes textgen-synth-model knows (real models' hyperparameters) and the GGUF layout
// each architecture is written in: llama.cpp's converter key names and tensor names, so the
// files load in llama.cpp as in textgen.
#ifndef TEXTGEN_CLIENT_SYNTH_SYNTH_LAYOUT_H_
#define TEXTGEN_CLIENT_SYNTH_SYNTH_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_writer.h"

namespace textgen {

// Architectures the writer lays out (GGUF `general.architecture`).
inline constexpr const char* kSynthArchs[] = {"llama",  "qwen2",    "qwen3",  "phi3",
                                              "gemma3", "qwen3moe", "gpt-oss"};

struct SynthShape {
  std::string name;
  std::string arch = "llama";
  int dim = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int ffn = 0;
  int ctx = 0;
  int head_dim = 0;  // 0: dim / heads
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied = false;  // no output.weight: the output projection is token_embd
  // The vocab GGUF under $TEXTGEN_MODELS/vocab/ whose tokenizer the model uses.
  std::string vocab = "ggml-vocab-llama-spm.gguf";
  // The model's vocabulary size when the vocab file has fewer tokens (gpt-oss's o200k tokenizer
  // is not among the vocab files): the tokenizer is padded with unused [PADn] tokens up to it,
  // so the embedding and output matrices have the real model's rows. 0: the file's count.
  int vocab_size = 0;
  // llama: Llama 3 rope scaling written as rope_freqs.weight (factor, original context).
  float llama3_factor = 0.0f;
  int llama3_orig_ctx = 0;
  // phi3: `longrope` scaling from this original context (rope_factors_long/short.weight).
  int longrope_orig_ctx = 0;
  // gemma3: the window of the sliding layers (five of every six) and their RoPE base;
  // gpt-oss: the window of the even layers (same RoPE base, no rope.freq_base_swa key).
  int sliding_window = 0;
  float rope_base_swa = 10000.0f;
  // gpt-oss: YaRN scaling by this factor from this original context (rope.scaling.* keys).
  float yarn_factor = 0.0f;
  int yarn_orig_ctx = 0;

  // Mixture of experts (qwen3moe, gpt-oss; llama with experts is Mixtral): experts per layer,
  // experts per token, and each expert's FFN width (0: `ffn`). 0 experts: a dense FFN.
  int n_expert = 0;
  int n_expert_used = 0;
  int expert_ffn = 0;

  int ExpertFfn() const { return expert_ffn > 0 ? expert_ffn : ffn; }
  int HeadDim() const { return head_dim > 0 ? head_dim : dim / heads; }
};

// The named shapes: llama2.c's TinyStories models, TinyLlama, and the small models of the
// families users run (Llama 3.2, Qwen2.5, Qwen3, Phi-3.5, Gemma 3) and mixtures of experts
// (Qwen3-30B-A3B, Mixtral 8x7B, gpt-oss-20b), with their real vocabularies (gpt-oss-20b: the
// Qwen3 tokenizer padded to its 201,088 tokens).
absl::Span<const SynthShape> SynthShapes();

// InvalidArgument naming the flag at fault (--dim, --heads, ...) when `s` cannot be written as
// `type` (heads not dividing, odd head size, rows not a multiple of a quantized block).
absl::Status ValidateSynthShape(const SynthShape& s, DType type);

struct SynthTotals {
  int64_t params = 0;
};

// Writes every `<arch>.*` hyperparameter key of `s` into `w` (n_vocab: the token count).
void SetSynthHyperparameters(GgufWriter& w, const SynthShape& s, int64_t n_vocab);

// The stored type of matrix `name` with rows of `ncols` values (a quantization mix's rules).
using SynthTypeFn = std::function<DType(std::string_view name, int64_t ncols)>;

// Adds every tensor of `s` in forward-pass order: matrices of `type_of(name, cols)` with
// N(0, 0.02)-like values keyed by (seed, name) (so the values do not depend on the type); norm
// weights 1 (Gemma's GGUF norms store 1 + w, so w = 0); biases, gpt-oss's attention sinks and
// routers small random F32; RoPE factor vectors as the real models have them. Matrices are
// generated and converted on `threads` threads (0: one per hardware thread) while the writer
// streams the file; the bytes do not depend on the thread count. InvalidArgument when a matrix's
// rows do not fit its type's blocks.
absl::Status AddSynthTensors(GgufWriter& w, const SynthShape& s, const SynthTypeFn& type_of,
                             int64_t n_vocab, uint64_t seed, SynthTotals* totals, int threads = 0);
// Every matrix of one type.
absl::Status AddSynthTensors(GgufWriter& w, const SynthShape& s, DType type, int64_t n_vocab,
                             uint64_t seed, SynthTotals* totals, int threads = 0);

// Llama 3 rope scaling as per-dimension divisors of the frequencies ([head_dim / 2]), what
// llama.cpp's converter writes as rope_freqs.weight (low_freq_factor 1, high_freq_factor 4).
std::vector<float> Llama3RopeFactors(int head_dim, float base, float factor, int orig_ctx);

}  // namespace textgen

#endif  // TEXTGEN_CLIENT_SYNTH_SYNTH_LAYOUT_H_
