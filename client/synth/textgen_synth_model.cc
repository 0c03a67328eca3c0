// textgen-synth-model: writes a Llama GGUF of a realistic size with synthetic weights, so speed
// can be measured on TinyLlama-sized models without downloading them (like vLLM's dummy
// weights). The tokenizer is copied from a vocab GGUF, so prompts tokenize as with the real
// model; the generated text is of course noise.
//
//   textgen-synth-model --shape NAME --type f32|f16|bf16|q8_0 --out PATH [--vocab GGUF] [--seed N]
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/format/dtype.h"
#include "engine/format/gguf_file.h"
#include "engine/format/gguf_writer.h"
#include "engine/format/quantize.h"
#include "engine/util/status_macros.h"

namespace textgen {
namespace {

constexpr char kUsage[] = R"(textgen-synth-model: write a Llama GGUF with synthetic weights.

Usage:
  textgen-synth-model --shape NAME --type TYPE --out PATH [--vocab GGUF] [--seed N]
  textgen-synth-model --shape custom --dim D --layers L --heads H [--kv-heads K] --ffn F
                      [--ctx C] --type TYPE --out PATH

  --shape NAME    stories15M, stories42M, stories110M, tinyllama-1.1b, or custom
  --type TYPE     f32, f16, bf16 or q8_0 for every matrix (norm vectors stay f32)
  --out PATH      the GGUF file to write (written to PATH.tmp, then renamed)
  --vocab GGUF    tokenizer source; every tokenizer.* key is copied and its token count is the
                  vocab size (default: $TEXTGEN_MODELS/vocab/ggml-vocab-llama-spm.gguf, else
                  ../shared/models/vocab/..., else models/vocab/...)
  --seed N        weights are a pure function of the seed and the tensor name (default 1)
  --dim, --layers, --heads, --kv-heads (default: --heads), --ffn, --ctx (default 2048):
                  the shape with --shape custom

Matrices hold approximately normal values with mean 0 and standard deviation 0.02 (the sum of
four uniforms, so bounded by +-0.07); norm weights are 1.
)";

struct Shape {
  std::string name;
  int dim = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int ffn = 0;
  int ctx = 0;
};

// The Llama shapes people benchmark: llama2.c's TinyStories models and TinyLlama 1.1B.
const Shape kShapes[] = {
    {"stories15M", 288, 6, 6, 6, 768, 256},
    {"stories42M", 512, 8, 8, 8, 1376, 1024},
    {"stories110M", 768, 12, 12, 12, 2048, 1024},
    {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 2048},
};

struct Args {
  std::string shape_name;
  Shape shape;
  std::string type_name;
  DType type = DType::kF32;
  std::string out;
  std::string vocab;
  uint64_t seed = 1;
};

[[noreturn]] void Die(int code, const std::string& message) {
  std::fprintf(stderr, "textgen-synth-model: %s\n", message.c_str());
  std::exit(code);
}
[[noreturn]] void BadFlag(const std::string& message) { Die(2, message); }

int ParseDim(const std::string& flag, const std::string& value) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 1 || v > (1 << 20)) {
    BadFlag(flag + ": expected an integer in 1..1048576, got '" + value + "'");
  }
  return v;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string DefaultVocab() {
  constexpr char kName[] = "/vocab/ggml-vocab-llama-spm.gguf";
  const char* dir = std::getenv("TEXTGEN_MODELS");
  if (dir != nullptr && *dir != '\0') return std::string(dir) + kName;
  // Same fallbacks as scripts/demo.sh: the shared models beside the checkout, then models/.
  const std::string shared = std::string("../shared/models") + kName;
  return FileExists(shared) ? shared : std::string("models") + kName;
}

// Checks the shape flags against each other and the type; messages name the flag at fault.
void ValidateShape(const Shape& s, DType type) {
  if (s.dim % s.heads != 0) {
    BadFlag(absl::StrCat("--heads: ", s.heads, " does not divide --dim ", s.dim));
  }
  if (s.heads % s.kv_heads != 0) {
    BadFlag(absl::StrCat("--kv-heads: ", s.kv_heads, " does not divide --heads ", s.heads));
  }
  if ((s.dim / s.heads) % 2 != 0) {
    BadFlag(absl::StrCat("--heads: head size --dim / --heads = ", s.dim / s.heads,
                         " must be even for RoPE"));
  }
  if (type == DType::kQ8_0) {
    // Q8_0 blocks of 32 run along rows: dim for most matrices, ffn for ffn_down.
    if (s.dim % kQ8_0BlockSize != 0) {
      BadFlag(absl::StrCat("--dim: ", s.dim, " must be a multiple of 32 for --type q8_0"));
    }
    if (s.ffn % kQ8_0BlockSize != 0) {
      BadFlag(absl::StrCat("--ffn: ", s.ffn, " must be a multiple of 32 for --type q8_0"));
    }
  }
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  a.vocab = DefaultVocab();
  std::optional<int> dim, layers, heads, kv_heads, ffn, ctx;
  std::string first_shape_flag;
  bool has_type = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) BadFlag(flag + ": missing value");
      return argv[++i];
    };
    auto shape_flag = [&](std::optional<int>& field) {
      field = ParseDim(flag, value());
      if (first_shape_flag.empty()) first_shape_flag = flag;
    };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--shape") {
      a.shape_name = value();
    } else if (flag == "--type") {
      a.type_name = value();
      has_type = true;
      if (a.type_name == "f32") {
        a.type = DType::kF32;
      } else if (a.type_name == "f16") {
        a.type = DType::kF16;
      } else if (a.type_name == "bf16") {
        a.type = DType::kBF16;
      } else if (a.type_name == "q8_0") {
        a.type = DType::kQ8_0;
      } else {
        BadFlag("--type: expected f32, f16, bf16 or q8_0, got '" + a.type_name + "'");
      }
    } else if (flag == "--out") {
      a.out = value();
    } else if (flag == "--vocab") {
      a.vocab = value();
    } else if (flag == "--seed") {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, &a.seed)) {
        BadFlag("--seed: expected an unsigned integer, got '" + v + "'");
      }
    } else if (flag == "--dim") {
      shape_flag(dim);
    } else if (flag == "--layers") {
      shape_flag(layers);
    } else if (flag == "--heads") {
      shape_flag(heads);
    } else if (flag == "--kv-heads") {
      shape_flag(kv_heads);
    } else if (flag == "--ffn") {
      shape_flag(ffn);
    } else if (flag == "--ctx") {
      shape_flag(ctx);
    } else {
      BadFlag("unknown flag '" + flag + "' (see --help)");
    }
  }
  if (a.shape_name.empty()) BadFlag("--shape: required (see --help)");
  if (!has_type) BadFlag("--type: required (f32, f16, bf16 or q8_0)");
  if (a.out.empty()) BadFlag("--out: required");

  if (a.shape_name == "custom") {
    auto required = [](const std::optional<int>& v, const char* flag) {
      if (!v) BadFlag(std::string(flag) + ": required with --shape custom");
      return *v;
    };
    a.shape.name = "custom";
    a.shape.dim = required(dim, "--dim");
    a.shape.layers = required(layers, "--layers");
    a.shape.heads = required(heads, "--heads");
    a.shape.kv_heads = kv_heads.value_or(a.shape.heads);
    a.shape.ffn = required(ffn, "--ffn");
    a.shape.ctx = ctx.value_or(2048);
  } else {
    const Shape* found = nullptr;
    std::string names;
    for (const Shape& s : kShapes) {
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
  }
  ValidateShape(a.shape, a.type);
  return a;
}

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
// while the writer streams the file.
absl::Status AddRandomMatrix(GgufWriter& w, const std::string& name, DType type, int64_t rows,
                             int64_t cols, uint64_t seed) {
  const uint64_t key = TensorKey(seed, name);
  GgufTensorFiller fill = [=](GgufTensorSink& sink) -> absl::Status {
    const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 18) / cols);
    std::vector<float> values;  // [chunk_rows, cols]
    std::vector<uint8_t> bytes;
    for (int64_t r = 0; r < rows; r += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - r) * cols;
      values.resize(n);
      FillNormal(key, static_cast<uint64_t>(r * cols), values.data(), n);
      TG_ASSIGN_OR_RETURN(size_t num_bytes, RowBytes(type, n));
      bytes.resize(num_bytes);
      TG_RETURN_IF_ERROR(FromF32(type, values, absl::MakeSpan(bytes)));
      TG_RETURN_IF_ERROR(sink.Append(bytes.data(), bytes.size()));
    }
    return absl::OkStatus();
  };
  return w.AddTensor(name, type, {cols, rows}, std::move(fill));
}

absl::Status AddOnes(GgufWriter& w, const std::string& name, int64_t n) {
  std::vector<float> ones(n, 1.0f);  // [n]
  return w.AddTensor(name, DType::kF32, {n},
                     absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(ones.data()),
                                         ones.size() * sizeof(float)));
}

// llama.cpp's general.file_type (LLAMA_FTYPE_*), so llama.cpp can load the file too.
uint32_t FileType(DType type) {
  switch (type) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ8_0:
      return 7;
    case DType::kBF16:
      return 32;
  }
  return 0;
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
  return std::move(vocab).value();
}

absl::StatusOr<Written> WriteModel(const Args& a, const GgufFile& vocab) {
  const GgufValue* tokens = vocab.Find("tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(tokens->array.size());
  const Shape& s = a.shape;
  const int64_t d = s.dim, ff = s.ffn, head_dim = s.dim / s.heads;
  const int64_t q_dim = int64_t{s.heads} * head_dim, kv_dim = int64_t{s.kv_heads} * head_dim;

  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", absl::StrCat("synthetic ", s.name, " ", a.type_name));
  w.SetUint32("general.file_type", FileType(a.type));
  if (a.type == DType::kQ8_0) w.SetUint32("general.quantization_version", 2);
  w.SetUint32("llama.context_length", s.ctx);
  w.SetUint32("llama.embedding_length", s.dim);
  w.SetUint32("llama.block_count", s.layers);
  w.SetUint32("llama.feed_forward_length", s.ffn);
  w.SetUint32("llama.attention.head_count", s.heads);
  w.SetUint32("llama.attention.head_count_kv", s.kv_heads);
  w.SetUint32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetUint32("llama.vocab_size", static_cast<uint32_t>(n_vocab));
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) w.Set(key, value);
  }

  Written out;
  // Matrices are [out, in] (rows of `in` values), as engine/model/llama_model.cc loads them.
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    out.params += rows * cols;
    return AddRandomMatrix(w, name, a.type, rows, cols, a.seed);
  };
  auto norm = [&](const std::string& name) {
    out.params += d;
    return AddOnes(w, name, d);
  };
  // Forward-pass order, so a cold mmap reads the file front to back.
  TG_RETURN_IF_ERROR(matrix("token_embd.weight", n_vocab, d));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    TG_RETURN_IF_ERROR(norm(p + "attn_norm.weight"));
    TG_RETURN_IF_ERROR(matrix(p + "attn_q.weight", q_dim, d));
    TG_RETURN_IF_ERROR(matrix(p + "attn_k.weight", kv_dim, d));
    TG_RETURN_IF_ERROR(matrix(p + "attn_v.weight", kv_dim, d));
    TG_RETURN_IF_ERROR(matrix(p + "attn_output.weight", d, q_dim));
    TG_RETURN_IF_ERROR(norm(p + "ffn_norm.weight"));
    TG_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", ff, d));
    TG_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", ff, d));
    TG_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", d, ff));
  }
  TG_RETURN_IF_ERROR(norm("output_norm.weight"));
  TG_RETURN_IF_ERROR(matrix("output.weight", n_vocab, d));

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
