// textgen-synth-model: writes a GGUF of a real model's shape (Llama, Qwen2/3, Phi-3, Gemma 3,
// and the mixtures of experts Mixtral, Qwen3-MoE, gpt-oss) with synthetic weights, so speed can be
// measured on the models users run without downloading them (like vLLM's dummy weights). The
// tokenizer is copied from a vocab GGUF, so prompts tokenize as with the real model; the generated
// text is of course noise.
//
//   textgen-synth-model --shape NAME --type f32|f16|bf16|q8_0|q4_k_m|... --out PATH
//                       [--vocab GGUF] [--seed N] [--threads N]
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/flags.h"
#include "client/synth/quant_mix.h"
#include "client/synth/synth_layout.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "engine/format/quantize.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr char kDescription[] =
    R"(textgen-synth-model: write a GGUF of a real shape with synthetic weights.

Usage:
  textgen-synth-model --shape NAME --type TYPE --out PATH [--vocab GGUF] [--seed N]
  textgen-synth-model --shape custom [--arch A] --dim D --layers L --heads H [--kv-heads K]
                      [--head-dim N] --ffn F [--ctx C] --type TYPE --out PATH

Matrices hold approximately normal values with mean 0 and standard deviation 0.02 (the sum of
four uniforms, so bounded by +-0.07); norm weights are 1.)";

constexpr char kShapeHelp[] =
    R"(stories15M, stories42M, stories110M, tinyllama-1.1b (llama, Llama 2
vocab); llama-3.2-1b (Llama 3 rope scaling), qwen2.5-0.5b, qwen3-0.6b,
phi-3.5-mini (longrope), gemma-3-1b (sliding window), qwen3-30b-a3b
(128 experts, 8 per token), mixtral-8x7b (8 experts, 2 per token), each
with its family's vocab; gpt-oss-20b (32 experts, 4 per token, sinks,
YaRN; the Qwen3 vocab padded to 201088 tokens); or custom. --layers N
writes a named shape at reduced depth)";

constexpr char kTypeHelp[] =
    R"(f32, f16, bf16: every matrix of that type; q8_0, q4_0, q4_1, q5_0,
q5_1, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m,
q6_k, iq4_nl, iq4_xs, mxfp4_moe: llama-quantize's file types, each
matrix of the type llama-quantize (no imatrix) gives it, quantized as
llama.cpp does (mxfp4_moe: experts MXFP4, other matrices Q8_0). Norms,
biases and routers stay f32)";

constexpr char kVocabHelp[] =
    R"(tokenizer source; every tokenizer.* key is copied and its token
count is the vocab size unless the shape pads it (gpt-oss-20b,
--vocab-size) (default: the shape's vocab file,
ggml-vocab-llama-spm.gguf for custom, in $TEXTGEN_MODELS/vocab/, else
../shared/models/vocab/, else models/vocab/))";

struct Args {
  std::string shape_name;
  SynthShape shape;
  std::string type_name;
  QuantMix mix;
  int threads = 0;
  std::string out;
  std::string vocab;
  uint64_t seed = 1;
};

[[noreturn]] void Die(int code, const std::string& message) {
  std::fprintf(stderr, "textgen-synth-model: %s\n", message.c_str());
  std::exit(code);
}
[[noreturn]] void BadFlag(const std::string& message) { Die(2, message); }

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string DefaultVocab(const std::string& file) {
  const std::string name = "/vocab/" + file;
  const char* dir = std::getenv("TEXTGEN_MODELS");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + name;
  // Same fallbacks as scripts/demo.sh: the shared models beside the checkout, then models/.
  const std::string shared = "../shared/models" + name;
  return FileExists(shared) ? shared : "models" + name;
}

// --shape custom's dimensions; each an error with a fixed shape.
struct CustomShapeFlags {
  std::optional<int> dim, layers, heads, kv_heads, head_dim, ffn, ctx, experts, experts_used,
      expert_ffn, vocab_size;
  std::optional<std::string> arch;
};

void AddShapeFlags(cli::FlagSet& f, CustomShapeFlags& c) {
  f.SetGroup("Custom shape (with --shape custom)");
  f.AddWith<std::string>("--arch", cli::Text(), "A",
                         "llama (default), qwen2, qwen3, phi3, gemma3, qwen3moe or gpt-oss: the "
                         "layout (gpt-oss: window 128 on even layers, YaRN x32 from ctx / 32)",
                         [&c](const std::string& v) { c.arch = v; });
  const auto dim = [&f](const char* name, std::optional<int>* field, const char* help) {
    f.AddWith<int>(name, cli::Int<int>(1, 1 << 20), "N", help, [field](int v) { *field = v; });
  };
  dim("--dim", &c.dim, "model width");
  dim("--layers", &c.layers,
      "transformer blocks (with a named shape: a reduced-depth model of its per-layer shape)");
  dim("--heads", &c.heads, "attention heads");
  dim("--kv-heads", &c.kv_heads, "key/value heads (default: --heads)");
  dim("--head-dim", &c.head_dim, "head size (default: dim / heads)");
  dim("--ffn", &c.ffn, "feed-forward width");
  dim("--ctx", &c.ctx, "trained context length (default 2048)");
  dim("--experts", &c.experts,
      "experts per layer (llama, qwen3moe or gpt-oss; default: a dense FFN)");
  dim("--experts-used", &c.experts_used, "experts per token (with --experts)");
  dim("--expert-ffn", &c.expert_ffn, "each expert's FFN width (default: --ffn)");
  dim("--vocab-size", &c.vocab_size,
      "pad the tokenizer with unused tokens to this many (default: the vocab file's count)");
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  CustomShapeFlags c;
  cli::FlagSet f("textgen-synth-model", kDescription, cli::Wording::kExpected);
  f.Add("--shape", &a.shape_name, cli::NonEmpty(), "NAME", kShapeHelp)->required();
  f.AddWith<std::string>("--type", cli::Text(), "TYPE", kTypeHelp, [&a](const std::string& v) {
     a.type_name = v;
     absl::StatusOr<QuantMix> mix = FindQuantMix(v);
     // Checked here rather than by a ValueParser: the message is FindQuantMix's own.
     if (!mix.ok()) BadFlag("--type: " + std::string(mix.status().message()));
     a.mix = *mix;
   })->required();
  f.Add("--out", &a.out, cli::NonEmpty(), "PATH",
        "the GGUF file to write (written to PATH.tmp, then renamed)")
      ->required();
  f.Add("--vocab", &a.vocab, cli::Text(), "GGUF", kVocabHelp);
  f.Add("--seed", &a.seed, cli::Uint64(), "N",
        "weights are a pure function of the seed and the tensor name (default 1)");
  f.Add("--threads", &a.threads, cli::Int<int>(1, 1024), "N",
        "threads converting weights (default: one per hardware thread)");
  AddShapeFlags(f, c);
  f.Parse(argc, argv);
  std::optional<int> dim = c.dim, layers = c.layers, heads = c.heads, kv_heads = c.kv_heads,
                     head_dim = c.head_dim, ffn = c.ffn, ctx = c.ctx;
  std::optional<std::string> arch = c.arch;
  std::string first_shape_flag;
  for (const char* flag :
       {"--arch", "--dim", "--heads", "--kv-heads", "--head-dim", "--ffn", "--ctx", "--experts",
        "--experts-used", "--expert-ffn", "--vocab-size"}) {
    if (first_shape_flag.empty() && f.Given(flag)) first_shape_flag = flag;
  }

  if (a.shape_name == "custom") {
    auto required = [](const std::optional<int>& v, const char* flag) {
      if (!v) BadFlag(std::string(flag) + ": required with --shape custom");
      return *v;
    };
    a.shape.name = "custom";
    a.shape.arch = arch.value_or("llama");
    a.shape.dim = required(dim, "--dim");
    a.shape.layers = required(layers, "--layers");
    a.shape.heads = required(heads, "--heads");
    a.shape.kv_heads = kv_heads.value_or(a.shape.heads);
    a.shape.head_dim = head_dim.value_or(0);
    a.shape.ffn = required(ffn, "--ffn");
    a.shape.ctx = ctx.value_or(2048);
    a.shape.n_expert = c.experts.value_or(0);
    a.shape.n_expert_used = c.experts_used.value_or(0);
    a.shape.expert_ffn = c.expert_ffn.value_or(0);
    a.shape.vocab_size = c.vocab_size.value_or(0);
    if (a.shape.arch == "gpt-oss") {  // as gpt-oss-20b: trained at 1/32 of its context
      a.shape.sliding_window = 128;
      a.shape.yarn_factor = 32.0f;
      a.shape.yarn_orig_ctx = std::max(1, a.shape.ctx / 32);
    }
  } else {
    const SynthShape* found = nullptr;
    std::string names;
    for (const SynthShape& s : SynthShapes()) {
      if (s.name == a.shape_name) found = &s;
      absl::StrAppend(&names, s.name, ", ");
    }
    if (found == nullptr) {
      BadFlag("--shape: unknown shape '" + a.shape_name + "' (expected " + names + "or custom)");
    }
    if (!first_shape_flag.empty()) {
      BadFlag(first_shape_flag + ": only with --shape custom (" + a.shape_name +
              " has a fixed shape)");
    }
    a.shape = *found;
    if (layers) {
      a.shape.layers = *layers;
      a.shape.name = absl::StrCat(found->name, "-", *layers, "l");
    }
  }
  if (absl::Status st = ValidateSynthShape(a.shape, a.mix.base); !st.ok()) {
    BadFlag(std::string(st.message()));
  }
  if (a.vocab.empty()) a.vocab = DefaultVocab(a.shape.vocab);
  return a;
}

struct Written {
  int64_t params = 0;
  uint64_t file_bytes = 0;
};

// The tokenizer source; a file that cannot be read or has no tokens is a bad --vocab.
std::unique_ptr<GgufFile> OpenVocab(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> vocab = GgufFile::Open(path);
  if (!vocab.ok()) {
    BadFlag(
        absl::StrCat("--vocab: ", vocab.status().message(), " (set --vocab or $TEXTGEN_MODELS)"));
  }
  const GgufValue* tokens = (*vocab)->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::kArray || tokens->array.empty()) {
    BadFlag("--vocab: " + path + " has no tokenizer.ggml.tokens array");
  }
  const GgufValue* types = (*vocab)->Find("tokenizer.ggml.token_type");
  if (types != nullptr &&
      (types->type != GgufValueType::kArray || types->array.size() != tokens->array.size())) {
    BadFlag("--vocab: " + path + " has a tokenizer.ggml.token_type that is not one per token");
  }
  return std::move(vocab).value();
}

// Copies every tokenizer.* key of `vocab` into `w`, the per-token arrays (tokens, token_type,
// scores) padded to `n_vocab` entries as llama.cpp's converters pad Qwen's: "[PADi]" tokens of
// type 5 (unused), which no text tokenizes to.
void CopyTokenizer(GgufWriter& w, const GgufFile& vocab, int64_t n_vocab) {
  for (const auto& [key, value] : vocab.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    GgufValue v = value;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.token_type" ||
        key == "tokenizer.ggml.scores") {
      for (int64_t i = static_cast<int64_t>(v.array.size()); i < n_vocab; ++i) {
        if (key == "tokenizer.ggml.tokens") {
          v.array.push_back(GgufString(absl::StrCat("[PAD", i, "]")));
        } else if (key == "tokenizer.ggml.token_type") {
          v.array.push_back(GgufInt(v.array_type, 5));
        } else {
          v.array.push_back(GgufFloat(v.array_type, -1000.0));
        }
      }
    }
    w.Set(key, std::move(v));
  }
}

absl::StatusOr<Written> WriteModel(const Args& a, const GgufFile& vocab) {
  const GgufValue* tokens = vocab.Find("tokenizer.ggml.tokens");
  const SynthShape& s = a.shape;
  const int64_t n_vocab = std::max<int64_t>(tokens->array.size(), s.vocab_size);

  GgufWriter w;
  w.SetString("general.architecture", s.arch);
  w.SetString("general.name", absl::StrCat("synthetic ", s.name, " ", a.type_name));
  // llama.cpp's LLAMA_FTYPE_* and ggml's quantization version, as llama-quantize writes them.
  w.SetUint32("general.file_type", a.mix.llama_ftype);
  const DType base = a.mix.base;
  if (base != DType::kF32 && base != DType::kF16 && base != DType::kBf16) {
    w.SetUint32("general.quantization_version", 2);
  }
  SetSynthHyperparameters(w, s, n_vocab);
  CopyTokenizer(w, vocab, n_vocab);

  Written out;
  SynthTotals totals;
  const QuantMixModel mix_model{.n_layer = s.layers,
                                .n_head = s.heads,
                                .n_head_kv = s.kv_heads,
                                .tied = s.tied,
                                .n_expert = s.n_expert};
  const SynthTypeFn type_of = [&](std::string_view name, int64_t ncols) {
    return ChooseTensorType(a.mix, mix_model, name, ncols);
  };
  TG_RETURN_IF_ERROR(AddSynthTensors(w, s, type_of, n_vocab, a.seed, &totals, a.threads));
  out.params = totals.params;
  TG_RETURN_IF_ERROR(w.Write(a.out));
  struct stat st;
  if (::stat(a.out.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", a.out, " after writing it"));
  }
  out.file_bytes = static_cast<uint64_t>(st.st_size);
  return out;
}

}  // namespace
}  // namespace textgen

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  const textgen::Args args = textgen::ParseArgs(argc, argv);
  const std::unique_ptr<textgen::GgufFile> vocab = textgen::OpenVocab(args.vocab);
  const size_t n_tokens = vocab->Find("tokenizer.ggml.tokens")->array.size();
  if (args.shape.vocab_size > 0 && static_cast<size_t>(args.shape.vocab_size) < n_tokens) {
    textgen::BadFlag(absl::StrCat("--vocab-size: ", args.shape.vocab_size, " is below the ",
                                  n_tokens, " tokens of ", args.vocab));
  }
  absl::StatusOr<textgen::Written> written = textgen::WriteModel(args, *vocab);
  if (!written.ok()) textgen::Die(1, std::string(written.status().message()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: shape %s, type %s, %lld parameters, %llu bytes, %.2f s\n", args.out.c_str(),
              args.shape.name.c_str(), args.type_name.c_str(),
              static_cast<long long>(written->params),
              static_cast<unsigned long long>(written->file_bytes), seconds);
  return 0;
}
