// The mixture-of-experts layer: routing (softmax, top-k, ties, renormalisation, SOFTMAX_WEIGHT),
// gpt-oss's clamped SwiGLU, the layer against a float64 evaluation of its definition (routed
// and shared experts, gpt-oss's biased experts), and batch
// invariance: a token's output does not depend on which other tokens share its experts.
#include "engine/model/moe_ffn.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/model.h"
#include "tests/test_util.h"

namespace textgen {
namespace moe_ffn_test {

TEST_CASE("routing takes the k most probable experts, highest first", "[moe]") {
  MoeConfig c;
  c.n_expert = 5;
  c.n_expert_used = 2;
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f, 2.0f};  // experts 1 and 4 tie
  int32_t experts[2];
  float weights[2];
  MoeFfn::Route(c, logits, experts, weights);
  CHECK(experts[0] == 1);  // a tie goes to the lower index
  CHECK(experts[1] == 4);
  double z = 0;
  for (float l : logits) z += std::exp(double{l});
  CHECK(weights[0] == Approx(std::exp(2.0) / z).epsilon(1e-6));
  CHECK(weights[1] == Approx(std::exp(2.0) / z).epsilon(1e-6));
  // Renormalised: the k weights sum to 1 (Mixtral, Qwen3-MoE).
  c.norm_topk = true;
  c.n_expert_used = 3;
  int32_t e3[3];
  float w3[3];
  MoeFfn::Route(c, logits, e3, w3);
  CHECK(e3[2] == 3);
  CHECK(w3[0] + w3[1] + w3[2] == Approx(1.0f).epsilon(1e-6));
  CHECK(w3[2] / w3[0] == Approx(std::exp(-1.0)).epsilon(1e-5));
}

TEST_CASE("SOFTMAX_WEIGHT routing: top-k by logit, then a softmax over the k", "[moe]") {
  MoeConfig c;
  c.n_expert = 5;
  c.n_expert_used = 3;
  c.gating = MoeGating::kSoftmaxWeight;
  const float logits[] = {0.5f, 2.0f, -1.0f, 1.0f, 2.0f};
  int32_t experts[3];
  float weights[3];
  MoeFfn::Route(c, logits, experts, weights);
  CHECK(experts[0] == 1);
  CHECK(experts[1] == 4);
  CHECK(experts[2] == 3);
  // softmax([2, 2, 1]): the unselected experts do not enter the denominator.
  const double z = 2 * std::exp(2.0) + std::exp(1.0);
  CHECK(weights[0] == Approx(std::exp(2.0) / z).epsilon(1e-6));
  CHECK(weights[1] == Approx(std::exp(2.0) / z).epsilon(1e-6));
  CHECK(weights[2] == Approx(std::exp(1.0) / z).epsilon(1e-6));
  // kSoftmax on the same logits picks the same experts with smaller weights (all 5 in the
  // denominator).
  c.gating = MoeGating::kSoftmax;
  float probs[3];
  MoeFfn::Route(c, logits, experts, probs);
  CHECK(probs[2] < weights[2] * 0.9f);
  // One expert: its weight is exactly 1 (llama.cpp's softmax of a single logit).
  c.gating = MoeGating::kSoftmaxWeight;
  c.n_expert_used = 1;
  MoeFfn::Route(c, logits, experts, weights);
  CHECK(experts[0] == 1);
  CHECK(weights[0] == 1.0f);
}

TEST_CASE("the clamped SwiGLU of gpt-oss: x sigmoid(1.702 x) (y + 1), x <= 7, |y| <= 7", "[moe]") {
  std::vector<float> gate = {-20.0f, -3.0f, -0.5f, 0.0f, 0.7f, 6.9f, 7.0f, 7.5f, 300.0f, 2.0f};
  const std::vector<float> up = {0.3f, -9.0f, 8.0f, 1.0f, -1.0f, 0.0f, 7.0f, -7.5f, 2.0f, 50.0f};
  const std::vector<float> g0 = gate;
  GatedActivation(FfnActivation::kSwigluOai, gate.data(), up.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    INFO("gate " << g0[i] << " up " << up[i]);
    const double x = std::min(double{g0[i]}, 7.0);
    const double y = std::clamp(double{up[i]}, -7.0, 7.0);
    CHECK(gate[i] == Approx(x / (1 + std::exp(-1.702 * x)) * (y + 1)).epsilon(1e-6).margin(1e-12));
  }
  // The clamp is really there: an unclamped gate of 300 would give ~300 (y + 1).
  CHECK(gate[8] == Approx(7.0 / (1 + std::exp(-1.702 * 7.0)) * 3.0).epsilon(1e-6));
  // The other activations through the same entry point.
  std::vector<float> silu = g0;
  GatedActivation(FfnActivation::kSilu, silu.data(), up.data(), silu.size());
  CHECK(silu[4] == Approx(0.7 / (1 + std::exp(-0.7)) * -1.0).epsilon(1e-6));
}

// Random F32 weights for a layer of `n_expert` experts, with a shared expert when `shared`.
struct Layer {
  MoeConfig config;
  int64_t d = 24;
  std::vector<float> router;                 // [E, d]
  std::vector<std::vector<float>> g, u, dn;  // per expert [ff, d], [ff, d], [d, ff]
  std::vector<float> sg, su, sd, sgate;      // shared [sh, d] x2, [d, sh], [d]
  // gpt-oss biases or empty: router [E], gate/up [E, ff], down [E, d].
  std::vector<float> rb, gb, ub, db;
};

std::vector<float> Random(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// oai: gpt-oss's layer (biases, SOFTMAX_WEIGHT routing, clamped SwiGLU); its gate and up
// biases are large enough that many values reach the clamp.
Layer MakeLayer(bool shared, bool oai = false) {
  Layer L;
  L.config.n_expert = 6;
  L.config.n_expert_used = 2;
  L.config.n_ff_expert = 40;
  L.config.n_ff_shared = shared ? 32 : 0;
  L.config.norm_topk = !shared;
  std::mt19937 rng(7);
  const int64_t d = L.d, ff = L.config.n_ff_expert, sh = L.config.n_ff_shared;
  L.router = Random(rng, L.config.n_expert * d, 1.0f);
  for (int e = 0; e < L.config.n_expert; ++e) {
    L.g.push_back(Random(rng, ff * d, 0.3f));
    L.u.push_back(Random(rng, ff * d, 0.3f));
    L.dn.push_back(Random(rng, d * ff, 0.3f));
  }
  if (shared) {
    L.sg = Random(rng, sh * d, 0.3f);
    L.su = Random(rng, sh * d, 0.3f);
    L.sd = Random(rng, d * sh, 0.3f);
    L.sgate = Random(rng, d, 0.5f);
  }
  if (oai) {
    L.config.gating = MoeGating::kSoftmaxWeight;
    L.config.act = FfnActivation::kSwigluOai;
    L.config.biases = true;
    L.config.norm_topk = false;
    const int64_t E = L.config.n_expert;
    L.rb = Random(rng, E, 0.5f);
    L.gb = Random(rng, E * ff, 5.0f);
    L.ub = Random(rng, E * ff, 5.0f);
    L.db = Random(rng, E * d, 0.3f);
  }
  return L;
}

std::unique_ptr<ops::Linear> MakeLinear(const std::vector<float>& w, int64_t out, int64_t in,
                                        ops::LinearCompute compute) {
  ops::LinearOptions o;
  o.compute = compute;
  o.copy_weights = true;
  auto l = ops::Linear::Create(
      ops::WeightView{DType::kF32, reinterpret_cast<const uint8_t*>(w.data()), out, in}, o);
  REQUIRE(l.ok());
  return std::move(l).value();
}

MoeFfn MakeFfn(const Layer& L, ops::LinearCompute compute) {
  const int64_t d = L.d, ff = L.config.n_ff_expert, sh = L.config.n_ff_shared;
  MoeWeights w;
  w.router = MakeLinear(L.router, L.config.n_expert, d, ops::LinearCompute::kF32);
  for (int e = 0; e < L.config.n_expert; ++e) {
    w.gate.push_back(MakeLinear(L.g[e], ff, d, compute));
    w.up.push_back(MakeLinear(L.u[e], ff, d, compute));
    w.down.push_back(MakeLinear(L.dn[e], d, ff, compute));
  }
  if (sh > 0) {
    w.shared_gate = MakeLinear(L.sg, sh, d, compute);
    w.shared_up = MakeLinear(L.su, sh, d, compute);
    w.shared_down = MakeLinear(L.sd, d, sh, compute);
    w.shared_gate_inp = L.sgate;
  }
  w.router_bias = L.rb;
  w.gate_bias = L.gb;
  w.up_bias = L.ub;
  w.down_bias = L.db;
  return MoeFfn(L.config, d, std::move(w));
}

// out = down(act(g x + gb, u x + ub)) + db in double (biases: null for none), act = silu or
// gpt-oss's clamped SwiGLU.
std::vector<double> Ffn(const std::vector<float>& g, const std::vector<float>& u,
                        const std::vector<float>& dn, int64_t ff, int64_t d, const float* x,
                        FfnActivation act = FfnActivation::kSilu, const float* gb = nullptr,
                        const float* ub = nullptr, const float* db = nullptr) {
  std::vector<double> h(ff), out(d, 0.0);
  for (int64_t i = 0; i < ff; ++i) {
    double a = gb != nullptr ? gb[i] : 0.0, b = ub != nullptr ? ub[i] : 0.0;
    for (int64_t j = 0; j < d; ++j) {
      a += double{g[i * d + j]} * x[j];
      b += double{u[i * d + j]} * x[j];
    }
    if (act == FfnActivation::kSwigluOai) {
      a = std::min(a, 7.0);
      b = std::clamp(b, -7.0, 7.0);
      h[i] = a / (1.0 + std::exp(-1.702 * a)) * (b + 1.0);
    } else {
      h[i] = a / (1.0 + std::exp(-a)) * b;
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    if (db != nullptr) out[j] = db[j];
    for (int64_t i = 0; i < ff; ++i) out[j] += double{dn[j * ff + i]} * h[i];
  }
  return out;
}

std::vector<double> Reference(const Layer& L, const float* x) {
  const int64_t d = L.d, E = L.config.n_expert, ff = L.config.n_ff_expert;
  std::vector<float> logits(E);
  for (int64_t e = 0; e < E; ++e) {
    double s = L.rb.empty() ? 0.0 : L.rb[e];
    for (int64_t j = 0; j < d; ++j) s += double{L.router[e * d + j]} * x[j];
    logits[e] = static_cast<float>(s);
  }
  std::vector<int32_t> experts(L.config.n_expert_used);
  std::vector<float> weights(L.config.n_expert_used);
  MoeFfn::Route(L.config, logits.data(), experts.data(), weights.data());
  std::vector<double> out(d, 0.0);
  const bool b = !L.gb.empty();
  for (size_t k = 0; k < experts.size(); ++k) {
    const int e = experts[k];
    const auto y = Ffn(L.g[e], L.u[e], L.dn[e], ff, d, x, L.config.act, b ? &L.gb[e * ff] : nullptr,
                       b ? &L.ub[e * ff] : nullptr, b ? &L.db[e * d] : nullptr);
    for (int64_t j = 0; j < d; ++j) out[j] += weights[k] * y[j];
  }
  if (L.config.n_ff_shared > 0) {
    const auto y = Ffn(L.sg, L.su, L.sd, L.config.n_ff_shared, d, x);
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) dot += double{L.sgate[j]} * x[j];
    const double gate = 1.0 / (1.0 + std::exp(-dot));
    for (int64_t j = 0; j < d; ++j) out[j] += gate * y[j];
  }
  return out;
}

TEST_CASE("the layer computes the weighted sum of its experts", "[moe]") {
  for (int kind : {0, 1, 2}) {
    const bool shared = kind == 1, oai = kind == 2;
    SECTION(oai ? "gpt-oss: biases, softmax over the k, clamped SwiGLU"
                : (shared ? "with a shared expert" : "routed experts only")) {
      const Layer L = MakeLayer(shared, oai);
      MoeFfn ffn = MakeFfn(L, ops::LinearCompute::kF32);
      const int64_t rows = 9;
      std::mt19937 rng(3);
      const std::vector<float> x = Random(rng, rows * L.d, 1.0f);
      std::vector<float> out(rows * L.d);
      REQUIRE(ffn.Forward(x.data(), rows, out.data()).ok());
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const auto want = Reference(L, &x[r * L.d]);
        for (int64_t j = 0; j < L.d; ++j) {
          worst = std::max(worst, std::abs(want[j] - out[r * L.d + j]));
        }
      }
      CHECK(worst < 1e-4);
    }
  }
}

TEST_CASE("a token's output does not depend on the other tokens of the batch", "[moe]") {
  // BF16 compute with batch-invariant kernels (the server's default on every level but AVX2).
  for (const Layer& L : {MakeLayer(true), MakeLayer(false, true)}) {
    for (auto compute : {ops::LinearCompute::kF32, ops::LinearCompute::kBf16}) {
      MoeFfn ffn = MakeFfn(L, compute);
      const int64_t rows = 13;
      std::mt19937 rng(11);
      const std::vector<float> x = Random(rng, rows * L.d, 1.0f);
      std::vector<float> all(rows * L.d), one(L.d), pair(2 * L.d);
      REQUIRE(ffn.Forward(x.data(), rows, all.data()).ok());
      for (int64_t r = 0; r < rows; ++r) {
        INFO("row " << r);
        REQUIRE(ffn.Forward(&x[r * L.d], 1, one.data()).ok());
        CHECK(std::memcmp(one.data(), &all[r * L.d], L.d * sizeof(float)) == 0);
        // Beside one other token (row order reversed).
        std::vector<float> two(2 * L.d);
        std::memcpy(two.data(), &x[((r + 5) % rows) * L.d], L.d * sizeof(float));
        std::memcpy(&two[L.d], &x[r * L.d], L.d * sizeof(float));
        REQUIRE(ffn.Forward(two.data(), 2, pair.data()).ok());
        CHECK(std::memcmp(&pair[L.d], &all[r * L.d], L.d * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("a mixture-of-experts model gives a prompt the same logits alone or batched", "[moe]") {
  ModelOptions mo;
  mo.llama.linear.compute = ops::LinearCompute::kBf16;
  mo.llama.linear.batch_invariant = true;
  for (const char* name :
       {"moe/qwen3moe.gguf", "moe/mixtral.gguf", "moe/qwen2moe.gguf", "moe/gpt-oss.gguf"}) {
    SECTION(name) {
      auto model = Model::Load(testing::ModelPath(name), mo);
      REQUIRE(model.ok());
      CausalLm& m = (*model)->lm();
      KvCacheOptions o;
      o.n_layers = m.config().n_layers;
      o.n_kv_heads = m.config().n_kv_heads;
      o.head_dim = m.config().head_dim;
      o.block_size = 16;
      o.num_blocks = 32;
      auto cache = KvCache::Create(o);
      REQUIRE(cache.ok());
      const std::vector<int32_t> a = {1, 80, 147, 201, 282, 57, 547, 241};
      const std::vector<int32_t> b = {1, 300, 12, 999, 45};
      std::vector<float> alone, batched;
      BlockTable ta;
      ForwardSeq fa{a, &ta, 0, true};
      REQUIRE(m.Forward(**cache, absl::MakeSpan(&fa, 1), &alone).ok());
      (*cache)->Free(ta);
      BlockTable tb, ta2;
      ForwardSeq both[] = {{b, &tb, 0, true}, {a, &ta2, 0, true}};
      REQUIRE(m.Forward(**cache, absl::MakeSpan(both, 2), &batched).ok());
      const size_t n = alone.size();
      REQUIRE(batched.size() == n + b.size() * m.config().n_vocab);
      CHECK(std::memcmp(alone.data(), &batched[batched.size() - n], n * sizeof(float)) == 0);
    }
  }
}

}  // namespace moe_ffn_test
}  // namespace textgen
