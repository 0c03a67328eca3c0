#include "client/synth/quant_mix.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace textgen {
namespace {

// LLAMA_FTYPE_* values from llama.h.
enum LlamaFtype : uint32_t {
  kAllF32 = 0,
  kMostlyF16 = 1,
  kMostlyQ4_0 = 2,
  kMostlyQ4_1 = 3,
  kMostlyQ8_0 = 7,
  kMostlyQ5_0 = 8,
  kMostlyQ5_1 = 9,
  kMostlyQ2_K = 10,
  kMostlyQ3_K_S = 11,
  kMostlyQ3_K_M = 12,
  kMostlyQ3_K_L = 13,
  kMostlyQ4_K_S = 14,
  kMostlyQ4_K_M = 15,
  kMostlyQ5_K_S = 16,
  kMostlyQ5_K_M = 17,
  kMostlyQ6_K = 18,
  kMostlyIQ4_NL = 25,
  kMostlyIQ4_XS = 30,
  kMostlyBF16 = 32,
  kMostlyMXFP4_MOE = 38,
};

constexpr QuantMix kMixes[] = {
    {"f32", kAllF32, DType::kF32},
    {"f16", kMostlyF16, DType::kF16},
    {"bf16", kMostlyBF16, DType::kBf16},
    {"q8_0", kMostlyQ8_0, DType::kQ8_0},
    {"q4_0", kMostlyQ4_0, DType::kQ4_0},
    {"q4_1", kMostlyQ4_1, DType::kQ4_1},
    {"q5_0", kMostlyQ5_0, DType::kQ5_0},
    {"q5_1", kMostlyQ5_1, DType::kQ5_1},
    {"q2_k", kMostlyQ2_K, DType::kQ2_K},
    {"q3_k_s", kMostlyQ3_K_S, DType::kQ3_K},
    {"q3_k_m", kMostlyQ3_K_M, DType::kQ3_K},
    {"q3_k_l", kMostlyQ3_K_L, DType::kQ3_K},
    {"q4_k_s", kMostlyQ4_K_S, DType::kQ4_K},
    {"q4_k_m", kMostlyQ4_K_M, DType::kQ4_K},
    {"q5_k_s", kMostlyQ5_K_S, DType::kQ5_K},
    {"q5_k_m", kMostlyQ5_K_M, DType::kQ5_K},
    {"q6_k", kMostlyQ6_K, DType::kQ6_K},
    {"iq4_nl", kMostlyIQ4_NL, DType::kIQ4_NL},
    {"iq4_xs", kMostlyIQ4_XS, DType::kIQ4_XS},
    {"mxfp4_moe", kMostlyMXFP4_MOE, DType::kMXFP4},
};

// The layer of "blk.N.*" (-1 for tensors outside the layers).
int LayerOf(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  std::from_chars(begin, name.data() + name.size(), layer);
  return layer;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama_tensor_get_type_impl for the file types of kMixes, dense models, no imatrix.
DType MixRule(uint32_t ftype, const QuantMixModel& m, std::string_view name, int64_t ncols,
              DType type) {
  const int n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  const bool output = name == "output.weight";
  const bool token_embd = name == "token_embd.weight";
  if (ftype == kMostlyMXFP4_MOE) {
    // The expert stacks (ggml ne[2] > 1) in MXFP4, every other matrix (the output projection
    // and token_embd included) in Q8_0.
    return m.n_expert > 1 && Contains(name, "_exps.") ? DType::kMXFP4 : DType::kQ8_0;
  }
  if (output || (m.tied && token_embd)) {
    // The output projection gets Q6_K (Q8_0 stays Q8_0), Q8_0 when rows do not fit its block.
    if (ncols % BlockSize(type) != 0) return DType::kQ8_0;
    return type != DType::kQ8_0 ? DType::kQ6_K : type;
  }
  if (token_embd) return type;  // only the IQ1/IQ2/IQ3/TQ mixes change it
  const int layer = LayerOf(name);
  if (m.n_expert == 8) {
    // Mixtral: K and V at Q8_0 ("trades just ~128MB"), the output projection at Q5_K in the
    // low-bit mixes.
    if (Contains(name, "attn_v.weight") || Contains(name, "attn_k.weight")) return DType::kQ8_0;
    if (Contains(name, "attn_output.weight")) {
      switch (ftype) {
        case kMostlyQ2_K:
        case kMostlyQ3_K_S:
        case kMostlyQ3_K_M:
        case kMostlyIQ4_NL:
        case kMostlyQ4_K_S:
        case kMostlyQ4_K_M:
        case kMostlyIQ4_XS:
          return DType::kQ5_K;
        default:
          return type;
      }
    }
  }
  if (Contains(name, "attn_qkv.weight") || Contains(name, "attn_kv_b.weight") ||
      Contains(name, "attn_v.weight")) {
    const int i = layer, n = m.n_layer;  // llama's i_attention_wv / n_attention_wv
    switch (ftype) {
      case kMostlyQ2_K:
        return n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
      case kMostlyQ3_K_M:
        return i < 2 ? DType::kQ5_K : DType::kQ4_K;
      case kMostlyQ3_K_L:
        return DType::kQ5_K;
      case kMostlyIQ4_NL:
      case kMostlyIQ4_XS:
        return n_gqa >= 4 ? DType::kQ5_K : type;
      case kMostlyQ4_K_M:
      case kMostlyQ5_K_M:
        return UseMoreBits(i, n) ? DType::kQ6_K : type;
      case kMostlyQ4_K_S:
        return i < 4 ? DType::kQ5_K : type;
      default:
        return type;
    }
  }
  if (Contains(name, "ffn_down")) {
    const int i = layer, n = m.n_layer;
    switch (ftype) {
      case kMostlyQ2_K:
        return DType::kQ3_K;
      case kMostlyQ3_K_M:
        return i < n / 16 ? DType::kQ5_K : DType::kQ4_K;  // Q3_K only for Falcon
      case kMostlyQ3_K_L:
        return DType::kQ5_K;
      case kMostlyQ4_K_M:
        return UseMoreBits(i, n) ? DType::kQ6_K : type;
      case kMostlyIQ4_NL:
      case kMostlyIQ4_XS:
        return i < n / 8 ? DType::kQ5_K : type;
      case kMostlyQ5_K_M:
        return UseMoreBits(i, n) ? DType::kQ6_K : type;
      case kMostlyQ4_K_S:
        return i < n / 8 ? DType::kQ5_K : type;
      default:
        return type;
    }
  }
  if (Contains(name, "attn_output.weight")) {
    switch (ftype) {
      case kMostlyQ2_K:
        return DType::kQ3_K;
      case kMostlyQ3_K_M:
        return DType::kQ4_K;
      case kMostlyQ3_K_L:
        return DType::kQ5_K;
      default:
        return type;
    }
  }
  return type;  // attn_q, attn_k, ffn_gate, ffn_up: only the IQ3 mixes change them
}

// tensor_type_fallback: a type whose blocks do not divide the rows.
DType Fallback(DType type, int64_t ncols) {
  if (ncols % BlockSize(type) == 0) return type;
  DType fallback = DType::kF16;
  switch (type) {
    case DType::kIQ4_XS:
      fallback = DType::kIQ4_NL;
      break;
    case DType::kQ2_K:
    case DType::kQ3_K:
      fallback = DType::kQ4_0;
      break;
    case DType::kQ4_K:
      fallback = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      fallback = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      fallback = DType::kQ8_0;
      break;
    default:
      break;  // llama-quantize gives up; F16 keeps the file writable
  }
  return ncols % BlockSize(fallback) == 0 ? fallback : DType::kF16;
}

}  // namespace

absl::Span<const QuantMix> QuantMixes() { return kMixes; }

absl::StatusOr<QuantMix> FindQuantMix(std::string_view name) {
  std::string names;
  for (const QuantMix& m : kMixes) {
    if (m.name == name) return m;
    absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(m.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown type '", std::string(name), "' (expected one of ", names, ")"));
}

DType ChooseTensorType(const QuantMix& mix, const QuantMixModel& model, std::string_view name,
                       int64_t ncols) {
  // F32/F16/BF16 files convert every weight to the one type; llama-quantize applies its
  // rules to quantized file types only.
  if (!IsQuantized(mix.base)) return mix.base;
  return Fallback(MixRule(mix.llama_ftype, model, name, ncols, mix.base), ncols);
}

}  // namespace textgen
