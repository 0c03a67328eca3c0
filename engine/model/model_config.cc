#include "engine/model/model_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 30;

// Reads an integer hyperparameter in [0, 2^30]; absent keys give `fallback` when it is >= 0.
absl::StatusOr<int> GetIntKey(const GgufFile& gguf, const std::string& key, int fallback = -1) {
  if (!gguf.Has(key)) {
    if (fallback >= 0) return fallback;
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": missing metadata key ", key));
  }
  TG_ASSIGN_OR_RETURN(uint64_t v, gguf.GetUint(key));
  if (v > static_cast<uint64_t>(kMaxDim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": ", key, " = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

// Reads a finite float hyperparameter; absent keys give `fallback`.
absl::StatusOr<float> GetFloatKey(const GgufFile& gguf, const std::string& key, float fallback) {
  if (!gguf.Has(key)) return fallback;
  TG_ASSIGN_OR_RETURN(double v, gguf.GetFloat(key));
  if (!std::isfinite(v) || std::abs(v) > 3e38) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": ", key, " = ", v, " is not a finite float"));
  }
  return static_cast<float>(v);
}

// An F32/F16/BF16 vector tensor of `n` elements (rope factors), or empty when absent.
absl::StatusOr<std::vector<float>> GetFactorTensor(const GgufFile& gguf, const std::string& name,
                                                   int n) {
  const GgufTensorInfo* t = gguf.FindTensor(name);
  if (t == nullptr) return std::vector<float>();
  if (t->dims.size() != 1 || t->dims[0] != n || IsQuantized(t->type)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF ", gguf.path(), ": tensor ", name,
                                                   " must be a float vector of ", n, " elements"));
  }
  std::vector<float> f(n);
  ToF32(t->type, t->data, f.data(), n);
  return f;
}

// Typed, range-checked access to a config.json object. Every error names the file, the key
// and the value found.
class JsonReader {
 public:
  JsonReader(const std::string& path, const nlohmann::json& j, std::string prefix = "")
      : path_(path), j_(j), prefix_(std::move(prefix)) {}

  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  absl::StatusOr<int> Int(const char* key, int fallback, int64_t lo = 0,
                          int64_t hi = kMaxDim) const {
    if (!Has(key)) {
      if (fallback >= 0) return fallback;
      return absl::InvalidArgumentError(absl::StrCat(path_, ": missing ", prefix_, key));
    }
    const nlohmann::json& v = j_[key];
    if (!v.is_number_integer()) return Bad(key, "an integer");
    // Unsigned values above INT64_MAX read back as negative, so both ends are checked.
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}
                          ? INT64_MAX
                          : v.get<int64_t>();
    if (x < lo || x > hi) return Bad(key, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
    return static_cast<int>(x);
  }

  // A finite number in [lo, hi] (integers accepted).
  absl::StatusOr<float> Float(const char* key, float fallback, double lo, double hi) const {
    if (!Has(key)) return fallback;
    const nlohmann::json& v = j_[key];
    if (!v.is_number()) return Bad(key, "a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      return Bad(key, absl::StrCat("a finite number in [", lo, ", ", hi, "]"));
    }
    return static_cast<float>(x);
  }

  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_boolean()) return Bad(key, "true or false");
    return j_[key].get<bool>();
  }

  absl::StatusOr<std::string> String(const char* key) const {
    if (!Has(key)) return absl::InvalidArgumentError(absl::StrCat(path_, ": missing ", key));
    if (!j_[key].is_string()) return Bad(key, "a string");
    return j_[key].get<std::string>();
  }

  absl::StatusOr<std::vector<float>> FloatArray(const char* key, size_t n) const {
    if (!Has(key) || !j_[key].is_array() || j_[key].size() != n) {
      return Bad(key, absl::StrCat("an array of ", n, " numbers"));
    }
    std::vector<float> out;
    for (const auto& e : j_[key]) {
      if (!e.is_number() || !std::isfinite(e.get<double>()) || !(e.get<double>() > 0) ||
          e.get<double>() > 1e30) {
        return Bad(key, absl::StrCat("an array of ", n, " positive finite numbers"));
      }
      out.push_back(e.get<float>());
    }
    return out;
  }

  // The nested object `key` (e.g. rope_scaling), or nullopt-like: Has() false.
  const nlohmann::json& Get(const char* key) const { return j_[key]; }

  absl::Status Bad(const char* key, const std::string& want) const {
    std::string value = j_.contains(key)
                            ? j_[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            : "(missing)";
    if (value.size() > 60) value = value.substr(0, 60) + "...";
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", prefix_, key, " = ", value, " must be ", want));
  }

 private:
  const std::string& path_;
  const nlohmann::json& j_;
  std::string prefix_;
};

}  // namespace

std::vector<float> Llama3RopeFactors(float base, int rope_dim, float factor, float low_freq_factor,
                                     float high_freq_factor, int original_ctx) {
  const double low_wavelen = original_ctx / low_freq_factor;
  const double high_wavelen = original_ctx / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(base), 2.0 * i / rope_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double smooth =
          (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

const std::vector<float>& RopeFactorsFor(const ModelConfig& c, int n_ctx) {
  if (!c.rope_freq_factors.empty()) return c.rope_freq_factors;
  const int orig = c.n_ctx_orig > 0 ? c.n_ctx_orig : c.n_ctx;
  return n_ctx > orig ? c.rope_factors_long : c.rope_factors_short;
}

absl::Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", what, " (", DebugString(), ")"));
  };
  auto finite_pos = [](float x) { return std::isfinite(x) && x > 0.0f; };
  if (arch == nullptr) return bad("unknown architecture");
  if (n_vocab <= 0) return bad("vocab size must be positive");
  if (n_embd <= 0 || n_layers <= 0 || n_ff <= 0) return bad("dimensions must be positive");
  if (n_heads <= 0) return bad("head count must be positive");
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return bad("KV head count must divide head count");
  }
  if (head_dim <= 0 || head_dim > 4096) return bad("head_dim must be in [1, 4096]");
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    return bad("RoPE dimension count must be even and at most head_dim");
  }
  if (n_ctx <= 0) return bad("context length must be positive");
  if (!finite_pos(rms_eps) || rms_eps > 1.0f) return bad("rms epsilon must be in (0, 1]");
  if (!finite_pos(rope_base) || !finite_pos(rope_base_swa)) {
    return bad("RoPE bases must be positive and finite");
  }
  if (!finite_pos(rope_freq_scale) || !finite_pos(rope_freq_scale_swa) ||
      !finite_pos(rope_attn_factor)) {
    return bad("RoPE scaling factors must be positive and finite");
  }
  for (const std::vector<float>* f :
       {&rope_freq_factors, &rope_factors_long, &rope_factors_short}) {
    if (f->empty()) continue;
    if (f->size() != static_cast<size_t>(rope_dim / 2)) {
      return bad("RoPE frequency factors must have rope_dim / 2 entries");
    }
    for (float x : *f) {
      if (!finite_pos(x)) return bad("RoPE frequency factors must be positive and finite");
    }
  }
  if (rope_factors_long.empty() != rope_factors_short.empty()) {
    return bad("longrope needs both long and short factors");
  }
  if (n_ctx_orig < 0) return bad("original context must not be negative");
  if (rope_yarn && (n_ctx_orig < 1 || !finite_pos(yarn_beta_fast) || !finite_pos(yarn_beta_slow))) {
    return bad("YaRN needs a positive original context and positive finite betas");
  }
  if (!std::isfinite(attn_scale) || attn_scale < 0.0f || !std::isfinite(attn_softcap) ||
      attn_softcap < 0.0f || !std::isfinite(final_softcap) || final_softcap < 0.0f) {
    return bad("attention scale and soft-caps must be finite and not negative");
  }
  if (sliding_window < 0) return bad("sliding window must not be negative");
  if (moe.n_expert < 0 || moe.n_expert > 4096) return bad("expert count must be in [0, 4096]");
  if (is_moe()) {
    if (moe.n_expert_used < 1 || moe.n_expert_used > moe.n_expert) {
      return bad("experts used per token must be in [1, expert count]");
    }
    if (moe.n_ff_expert <= 0) return bad("expert feed-forward length must be positive");
    if (arch->moe_shared_expert && moe.n_ff_shared <= 0) {
      return bad("shared expert feed-forward length must be positive");
    }
  } else if (arch->moe == MoeUse::kAlways) {
    return bad("a mixture-of-experts architecture needs an expert count");
  }
  if (!swa_layers.empty() && swa_layers.size() != static_cast<size_t>(n_layers)) {
    return bad("the sliding-window layer list must have one entry per layer");
  }
  return absl::OkStatus();
}

std::string ModelConfig::DebugString() const {
  return absl::StrFormat(
      "arch=%s vocab=%d ctx=%d embd=%d layers=%d ff=%d heads=%d kv_heads=%d head_dim=%d "
      "rope_dim=%d rope_base=%g rope_scale=%g rope_factors=%d rms_eps=%g window=%d tied=%d "
      "weights=%s experts=%d used=%d expert_ff=%d shared_ff=%d yarn=%d",
      architecture, n_vocab, n_ctx, n_embd, n_layers, n_ff, n_heads, n_kv_heads, head_dim, rope_dim,
      rope_base, rope_freq_scale,
      static_cast<int>(rope_freq_factors.size() + rope_factors_long.size()), rms_eps,
      sliding_window, tied_embeddings ? 1 : 0, DTypeName(weight_type), moe.n_expert,
      moe.n_expert_used, moe.n_ff_expert, moe.n_ff_shared, rope_yarn ? 1 : 0);
}

namespace {

// Per-layer sliding-window flags from the architecture's default period.
std::vector<bool> SwaPattern(const ArchSpec& a, int n_layers) {
  std::vector<bool> out(n_layers, false);
  for (int l = 0; l < n_layers && a.swa_period > 0; ++l) {
    out[l] = l % a.swa_period < a.swa_period - 1;
  }
  return out;
}

// Gemma's query scale as llama.cpp derives it: 1/sqrt(head_dim), except the 27B models, which
// use 1/sqrt(n_embd / n_heads) (their query_pre_attn_scalar).
float GemmaGgufQueryScale(const ModelConfig& c) {
  const bool is_27b = (c.architecture == "gemma2" && c.n_layers == 46) ||
                      (c.architecture == "gemma3" && c.n_layers == 62);
  return 1.0f / std::sqrt(static_cast<float>(is_27b ? c.n_embd / c.n_heads : c.head_dim));
}

// `<arch>.expert_*` keys (llama.cpp's names). The expert width falls back as llama.cpp's
// loaders do (ArchSpec::moe_width_is_n_ff); Validate checks the values.
absl::Status ReadMoeKeys(const GgufFile& gguf, const std::string& a, ModelConfig* c) {
  MoeConfig& m = c->moe;
  TG_ASSIGN_OR_RETURN(m.n_expert, GetIntKey(gguf, a + "expert_count", 0));
  if (m.n_expert == 0) return absl::OkStatus();
  TG_ASSIGN_OR_RETURN(m.n_expert_used, GetIntKey(gguf, a + "expert_used_count"));
  const int fallback =
      c->arch->moe_width_is_n_ff || m.n_expert_used <= 0 ? c->n_ff : c->n_ff / m.n_expert_used;
  TG_ASSIGN_OR_RETURN(m.n_ff_expert, GetIntKey(gguf, a + "expert_feed_forward_length", fallback));
  if (c->arch->moe_shared_expert) {
    TG_ASSIGN_OR_RETURN(m.n_ff_shared,
                        GetIntKey(gguf, a + "expert_shared_feed_forward_length", c->n_ff));
  }
  m.norm_topk = c->arch->moe_norm_topk;
  m.gating = c->arch->moe_gating;
  m.act = c->arch->ffn_act;
  m.biases = c->arch->moe_biases;
  return absl::OkStatus();
}

// YaRN's keys (rope.scaling.type yarn, factor already read into rope_freq_scale). The magnitude
// scale is what llama.cpp ends up applying to cos and sin (llama-context.cpp cancels its own
// attention factor, then ggml's rope_yarn multiplies by 1 + 0.1 ln(1 / freq_scale)), in float.
absl::Status ReadYarnKeys(const GgufFile& gguf, const std::string& a, ModelConfig* c) {
  c->rope_yarn = true;
  TG_ASSIGN_OR_RETURN(c->n_ctx_orig,
                      GetIntKey(gguf, a + "rope.scaling.original_context_length", c->n_ctx));
  TG_ASSIGN_OR_RETURN(c->yarn_beta_fast,
                      GetFloatKey(gguf, a + "rope.scaling.yarn_beta_fast", 32.0f));
  TG_ASSIGN_OR_RETURN(c->yarn_beta_slow,
                      GetFloatKey(gguf, a + "rope.scaling.yarn_beta_slow", 1.0f));
  c->rope_attn_factor = 1.0f + 0.1f * std::log(1.0f / c->rope_freq_scale);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  TG_ASSIGN_OR_RETURN(c.architecture, gguf.GetString("general.architecture"));
  c.arch = FindArchByGguf(c.architecture);
  if (c.arch == nullptr) {
    return absl::UnimplementedError(absl::StrCat("GGUF ", gguf.path(), ": unknown architecture '",
                                                 c.architecture,
                                                 "' (supported: ", SupportedArchitectures(), ")"));
  }
  const ArchSpec& arch = *c.arch;
  if (gguf.Has("general.name")) {
    TG_ASSIGN_OR_RETURN(c.name, gguf.GetString("general.name"));
  }
  const std::string a = c.architecture + ".";
  TG_ASSIGN_OR_RETURN(c.n_ctx, GetIntKey(gguf, a + "context_length"));
  TG_ASSIGN_OR_RETURN(c.n_embd, GetIntKey(gguf, a + "embedding_length"));
  TG_ASSIGN_OR_RETURN(c.n_layers, GetIntKey(gguf, a + "block_count"));
  TG_ASSIGN_OR_RETURN(c.n_ff, GetIntKey(gguf, a + "feed_forward_length"));
  TG_ASSIGN_OR_RETURN(c.n_heads, GetIntKey(gguf, a + "attention.head_count"));
  TG_ASSIGN_OR_RETURN(c.n_kv_heads, GetIntKey(gguf, a + "attention.head_count_kv", c.n_heads));
  if (c.n_heads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF ", gguf.path(), ": ", a, "attention.head_count must be positive"));
  }
  TG_ASSIGN_OR_RETURN(c.head_dim,
                      GetIntKey(gguf, a + "attention.key_length", c.n_embd / c.n_heads));
  TG_ASSIGN_OR_RETURN(int value_length, GetIntKey(gguf, a + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim) {
    return absl::UnimplementedError(absl::StrCat("GGUF ", gguf.path(), ": value_length ",
                                                 value_length, " != key_length ", c.head_dim));
  }
  TG_ASSIGN_OR_RETURN(c.rope_dim, GetIntKey(gguf, a + "rope.dimension_count", c.head_dim));
  TG_ASSIGN_OR_RETURN(c.rope_base, GetFloatKey(gguf, a + "rope.freq_base", 10000.0f));
  TG_ASSIGN_OR_RETURN(c.rms_eps, GetFloatKey(gguf, a + "attention.layer_norm_rms_epsilon", 1e-5f));
  if (gguf.Has(a + "rope.scaling.type")) {
    TG_ASSIGN_OR_RETURN(std::string type, gguf.GetString(a + "rope.scaling.type"));
    TG_ASSIGN_OR_RETURN(float factor, GetFloatKey(gguf, a + "rope.scaling.factor", 1.0f));
    if (type == "linear" || type == "yarn") {
      if (!(factor > 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GGUF ", gguf.path(), ": ", a, "rope.scaling.factor = ", factor, " must be positive"));
      }
      c.rope_freq_scale = 1.0f / factor;
      if (type == "yarn") TG_RETURN_IF_ERROR(ReadYarnKeys(gguf, a, &c));
    } else if (type != "none" && !(type == "longrope" && arch.reads_longrope)) {
      return absl::UnimplementedError(
          absl::StrCat("GGUF ", gguf.path(), ": rope scaling type '", type, "' is not supported"));
    }
  }
  c.rope_base_swa = c.rope_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
  if (arch.reads_swa_rope_base) {
    TG_ASSIGN_OR_RETURN(c.rope_base_swa, GetFloatKey(gguf, a + "rope.freq_base_swa", 10000.0f));
    c.rope_freq_scale_swa = 1.0f;
  }
  const int half = c.rope_dim / 2;
  TG_ASSIGN_OR_RETURN(c.rope_freq_factors, GetFactorTensor(gguf, "rope_freqs.weight", half));
  if (arch.reads_longrope) {
    TG_ASSIGN_OR_RETURN(c.rope_factors_long,
                        GetFactorTensor(gguf, "rope_factors_long.weight", half));
    TG_ASSIGN_OR_RETURN(c.rope_factors_short,
                        GetFactorTensor(gguf, "rope_factors_short.weight", half));
    TG_ASSIGN_OR_RETURN(c.n_ctx_orig,
                        GetIntKey(gguf, a + "rope.scaling.original_context_length", c.n_ctx));
    TG_ASSIGN_OR_RETURN(c.rope_attn_factor,
                        GetFloatKey(gguf, a + "rope.scaling.attn_factor", 1.0f));
  }
  if (arch.reads_softcap) {
    TG_ASSIGN_OR_RETURN(c.attn_softcap, GetFloatKey(gguf, a + "attn_logit_softcapping", 0.0f));
    TG_ASSIGN_OR_RETURN(c.final_softcap, GetFloatKey(gguf, a + "final_logit_softcapping", 0.0f));
  }
  if (arch.reads_window) {
    TG_ASSIGN_OR_RETURN(c.sliding_window, GetIntKey(gguf, a + "attention.sliding_window", 0));
    c.swa_layers = SwaPattern(arch, c.n_layers);
  } else if (gguf.Has(a + "attention.sliding_window_pattern")) {
    // Sliding-window layers where the table runs none (OLMo 3 is written as olmo2): full
    // attention there would be silently wrong.
    return absl::UnimplementedError(
        absl::StrCat("GGUF ", gguf.path(), ": sliding-window attention layers (", a,
                     "attention.sliding_window_pattern) are not supported for ", c.architecture));
  }
  if (arch.gemma_query_scale && c.head_dim > 0) c.attn_scale = GemmaGgufQueryScale(c);
  if (arch.moe != MoeUse::kNone) TG_RETURN_IF_ERROR(ReadMoeKeys(gguf, a, &c));
  int vocab_from_tokens = 0;
  if (gguf.Has("tokenizer.ggml.tokens")) {
    const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
    vocab_from_tokens = static_cast<int>(tokens->array.size());
  }
  TG_ASSIGN_OR_RETURN(c.n_vocab, GetIntKey(gguf, a + "vocab_size", vocab_from_tokens));
  c.tied_embeddings = gguf.FindTensor("output.weight") == nullptr;
  for (const char* probe : {"blk.0.attn_q.weight", "blk.0.attn_qkv.weight"}) {
    if (const GgufTensorInfo* q = gguf.FindTensor(probe); q != nullptr) c.weight_type = q->type;
  }
  TG_RETURN_IF_ERROR(c.Validate());
  return c;
}

namespace {

// rope_scaling of a config.json: linear, llama3, longrope (Phi-3), or none.
absl::Status ReadHfRopeScaling(const std::string& path, const JsonReader& top, ModelConfig& c) {
  if (!top.Has("rope_scaling")) return absl::OkStatus();
  const nlohmann::json& rs = top.Get("rope_scaling");
  if (!rs.is_object()) return top.Bad("rope_scaling", "an object or null");
  const JsonReader r(path, rs, "rope_scaling.");
  std::string type;
  if (r.Has("rope_type")) {
    TG_ASSIGN_OR_RETURN(type, r.String("rope_type"));
  } else {
    TG_ASSIGN_OR_RETURN(type, r.String("type"));
  }
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    TG_ASSIGN_OR_RETURN(float factor, r.Float("factor", -1.0f, 1e-6, 1e6));
    if (factor < 0.0f) return r.Bad("factor", "a positive number");
    c.rope_freq_scale = 1.0f / factor;
    return absl::OkStatus();
  }
  if (type == "llama3") {
    TG_ASSIGN_OR_RETURN(float factor, r.Float("factor", -1.0f, 1e-6, 1e6));
    TG_ASSIGN_OR_RETURN(float low, r.Float("low_freq_factor", 1.0f, 1e-6, 1e6));
    TG_ASSIGN_OR_RETURN(float high, r.Float("high_freq_factor", 4.0f, 1e-6, 1e6));
    TG_ASSIGN_OR_RETURN(int orig, r.Int("original_max_position_embeddings", 8192, 1));
    if (factor < 0.0f) return r.Bad("factor", "a positive number");
    if (!(high > low)) return r.Bad("high_freq_factor", "greater than low_freq_factor");
    c.rope_freq_factors = Llama3RopeFactors(c.rope_base, c.rope_dim, factor, low, high, orig);
    return absl::OkStatus();
  }
  if (type == "longrope" && c.arch->reads_longrope) {
    const size_t half = static_cast<size_t>(c.rope_dim / 2);
    TG_ASSIGN_OR_RETURN(c.rope_factors_long, r.FloatArray("long_factor", half));
    TG_ASSIGN_OR_RETURN(c.rope_factors_short, r.FloatArray("short_factor", half));
    // transformers: factor = max_position_embeddings / original_max_position_embeddings, and
    // attention_factor, unless given, sqrt(1 + ln(factor) / ln(original)) (1 when factor <= 1).
    const int orig = c.n_ctx_orig > 0 ? c.n_ctx_orig : c.n_ctx;
    const double factor = static_cast<double>(c.n_ctx) / orig;
    const float fallback =
        factor <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1 + std::log(factor) / std::log(orig)));
    TG_ASSIGN_OR_RETURN(c.rope_attn_factor, r.Float("attention_factor", fallback, 1e-6, 1e6));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat(path, ": rope_scaling type '", type, "' is not supported"));
}

// Hugging Face's expert keys: Mixtral's num_local_experts (experts as wide as
// intermediate_size), Qwen3-MoE's num_experts, moe_intermediate_size and norm_topk_prob.
// Every layer must be a mixture (decoder_sparse_step 1, no mlp_only_layers): dense layers
// between them are refused by name. Validate checks the counts.
absl::Status ReadHfMoeKeys(const JsonReader& r, ModelConfig* c) {
  MoeConfig& m = c->moe;
  const char* count = r.Has("num_local_experts") ? "num_local_experts" : "num_experts";
  TG_ASSIGN_OR_RETURN(m.n_expert, r.Int(count, 0, 0, 1 << 20));
  if (m.n_expert == 0) return absl::OkStatus();
  TG_ASSIGN_OR_RETURN(m.n_expert_used, r.Int("num_experts_per_tok", -1, 0, 1 << 20));
  TG_ASSIGN_OR_RETURN(m.n_ff_expert, r.Int("moe_intermediate_size", c->n_ff, 1));
  TG_ASSIGN_OR_RETURN(m.norm_topk, r.Bool("norm_topk_prob", c->arch->moe_norm_topk));
  TG_ASSIGN_OR_RETURN(const int step, r.Int("decoder_sparse_step", 1, 0, 4096));
  if (step != 1)
    return r.Bad("decoder_sparse_step",
                 "1 (dense layers between experts' layers are not supported)");
  if (r.Has("mlp_only_layers") &&
      !(r.Get("mlp_only_layers").is_array() && r.Get("mlp_only_layers").empty())) {
    return r.Bad("mlp_only_layers", "[] (dense layers between experts' layers are not supported)");
  }
  m.gating = c->arch->moe_gating;
  m.act = c->arch->ffn_act;
  m.biases = c->arch->moe_biases;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ConfigFromHfConfigJson(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // nlohmann's parser also refuses numbers outside double's range (1e400) here.
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  const JsonReader r(path, j);
  ModelConfig c;
  TG_ASSIGN_OR_RETURN(std::string model_type, r.String("model_type"));
  c.arch = FindArchByHfType(model_type);
  if (c.arch == nullptr) {
    std::vector<std::string> types;
    for (const ArchSpec& a : AllArchitectures())
      types.insert(types.end(), a.hf_types.begin(), a.hf_types.end());
    return absl::UnimplementedError(absl::StrCat(path, ": unknown model_type '", model_type,
                                                 "' (supported: ", absl::StrJoin(types, ", "),
                                                 ")"));
  }
  const ArchSpec& arch = *c.arch;
  c.architecture = arch.gguf_arch;
  TG_ASSIGN_OR_RETURN(c.n_vocab, r.Int("vocab_size", -1, 1));
  TG_ASSIGN_OR_RETURN(c.n_ctx, r.Int("max_position_embeddings", 2048, 1));
  TG_ASSIGN_OR_RETURN(c.n_embd, r.Int("hidden_size", -1, 1));
  TG_ASSIGN_OR_RETURN(c.n_layers, r.Int("num_hidden_layers", -1, 1, 4096));
  TG_ASSIGN_OR_RETURN(c.n_ff, r.Int("intermediate_size", -1, 1));
  TG_ASSIGN_OR_RETURN(c.n_heads, r.Int("num_attention_heads", -1, 1, 4096));
  TG_ASSIGN_OR_RETURN(c.n_kv_heads, r.Int("num_key_value_heads", c.n_heads, 1, 4096));
  TG_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim", c.n_embd / c.n_heads, 1, 4096));
  TG_ASSIGN_OR_RETURN(float partial_rotary, r.Float("partial_rotary_factor", 1.0f, 1e-6, 1.0));
  c.rope_dim = static_cast<int>(c.head_dim * partial_rotary) / 2 * 2;
  TG_ASSIGN_OR_RETURN(c.rope_base, r.Float("rope_theta", 10000.0f, 1e-6, 1e30));
  TG_ASSIGN_OR_RETURN(c.rms_eps, r.Float("rms_norm_eps", 1e-6f, 1e-30, 1.0));
  TG_ASSIGN_OR_RETURN(c.tied_embeddings, r.Bool("tie_word_embeddings", arch.embed_scale));
  if (arch.reads_longrope) {
    TG_ASSIGN_OR_RETURN(c.n_ctx_orig, r.Int("original_max_position_embeddings", c.n_ctx, 1));
  }
  TG_RETURN_IF_ERROR(ReadHfRopeScaling(path, r, c));
  c.rope_base_swa = c.rope_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
  if (arch.reads_swa_rope_base) {
    TG_ASSIGN_OR_RETURN(c.rope_base_swa, r.Float("rope_local_base_freq", 10000.0f, 1e-6, 1e30));
    c.rope_freq_scale_swa = 1.0f;
  }
  if (arch.reads_softcap) {
    TG_ASSIGN_OR_RETURN(c.attn_softcap, r.Float("attn_logit_softcapping", 0.0f, 0.0, 1e30));
    TG_ASSIGN_OR_RETURN(c.final_softcap, r.Float("final_logit_softcapping", 0.0f, 0.0, 1e30));
  }
  if (arch.gemma_query_scale) {
    TG_ASSIGN_OR_RETURN(
        float qpas, r.Float("query_pre_attn_scalar", static_cast<float>(c.head_dim), 1e-6, 1e30));
    c.attn_scale = 1.0f / std::sqrt(qpas);
  }
  if (arch.reads_window) {
    TG_ASSIGN_OR_RETURN(c.sliding_window, r.Int("sliding_window", 0, 0));
    if (r.Has("layer_types")) {
      const nlohmann::json& lt = r.Get("layer_types");
      if (!lt.is_array() || lt.size() != static_cast<size_t>(c.n_layers)) {
        return r.Bad("layer_types", "an array with one entry per layer");
      }
      for (const auto& t : lt) {
        if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
          return r.Bad("layer_types", "\"sliding_attention\" or \"full_attention\" entries");
        }
        c.swa_layers.push_back(t == "sliding_attention");
      }
    } else {
      ArchSpec spec = arch;
      TG_ASSIGN_OR_RETURN(spec.swa_period,
                          r.Int("sliding_window_pattern", arch.swa_period, 1, 4096));
      c.swa_layers = SwaPattern(spec, c.n_layers);
    }
  }
  if (arch.moe != MoeUse::kNone) TG_RETURN_IF_ERROR(ReadHfMoeKeys(r, &c));
  TG_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace textgen
