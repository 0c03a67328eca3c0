// The medians behind olmo2_parity_test.cc's kCalibration: a float64 Llama forward pass of
// TinyStories-656K-F32.gguf over each case's prompt_ids + generated_ids of a greedy reference
// of that model (greedy_ref's output on the 5 reference prompts), printing per layer the
// median over all positions of: RMS of the residual stream entering the attention and the FFN,
// RMS of q and k after the pre-norm (before RoPE), RMS of the attention and FFN block outputs.
// Self-check: the argmax at every generated position must be the reference's id.
// usage: calibrate TinyStories-656K-F32.gguf BASE.greedy.json
// Build: g++ -O2 -std=c++17 calibrate.cpp -I<llama.cpp>/ggml/include -L<build>/bin -lggml
//        -lggml-base -Wl,-rpath,<build>/bin
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "nlohmann/json.hpp"

namespace {

constexpr int kEmbd = 128, kHeads = 8, kKvHeads = 4, kHeadDim = 16, kFf = 384, kLayers = 2;
constexpr int kVocab = 2048;
constexpr double kEps = 1e-6, kRopeBase = 10000.0;
using Vec = std::vector<double>;

ggml_context* g_ctx = nullptr;

const float* Tensor(const std::string& name) {
  ggml_tensor* t = ggml_get_tensor(g_ctx, name.c_str());
  if (t == nullptr) {
    fprintf(stderr, "missing %s\n", name.c_str());
    exit(1);
  }
  return static_cast<const float*>(t->data);
}

// w [rows, cols] . x
Vec MatVec(const float* w, int rows, int cols, const Vec& x) {
  Vec y(rows);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

double Rms(const Vec& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s / x.size());
}

Vec RmsNorm(const Vec& x, const float* g) {
  double s = 0;
  for (double v : x) s += v * v;
  const double r = std::sqrt(s / x.size() + kEps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / r * g[i];
  return y;
}

// GGUF Llama rows: RoPE pairs (2i, 2i+1) of each head.
void Rope(Vec& v, int heads, int pos) {
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < kHeadDim / 2; ++i) {
      const double theta = pos * std::pow(kRopeBase, -2.0 * i / kHeadDim);
      double& a = v[h * kHeadDim + 2 * i];
      double& b = v[h * kHeadDim + 2 * i + 1];
      const double x0 = a, x1 = b;
      a = x0 * std::cos(theta) - x1 * std::sin(theta);
      b = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

double Median(Vec v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

enum Stat { kXAttn, kXFfn, kQ, kK, kAttnOut, kFfnOut, kNumStats };
const char* const kStatNames[] = {"x_attn", "x_ffn", "q", "k", "attn_out", "ffn_out"};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  gguf_init_params params = {false, &g_ctx};
  if (gguf_init_from_file(argv[1], params) == nullptr) return 1;
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(argv[2]));
  Vec stats[kLayers][kNumStats];
  int checked = 0, wrong = 0;
  for (const auto& c : ref["cases"]) {
    std::vector<int> ids = c["prompt_ids"].get<std::vector<int>>();
    const size_t n_prompt = ids.size();
    for (int t : c["generated_ids"]) ids.push_back(t);
    std::vector<Vec> keys[kLayers], values[kLayers];
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      Vec x(Tensor("token_embd.weight") + ids[pos] * kEmbd,
            Tensor("token_embd.weight") + (ids[pos] + 1) * kEmbd);
      for (int l = 0; l < kLayers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        Vec* st = stats[l];
        const Vec xn = RmsNorm(x, Tensor(b + "attn_norm.weight"));
        Vec q = MatVec(Tensor(b + "attn_q.weight"), kHeads * kHeadDim, kEmbd, xn);
        Vec k = MatVec(Tensor(b + "attn_k.weight"), kKvHeads * kHeadDim, kEmbd, xn);
        st[kXAttn].push_back(Rms(x));
        st[kQ].push_back(Rms(q));
        st[kK].push_back(Rms(k));
        Rope(q, kHeads, static_cast<int>(pos));
        Rope(k, kKvHeads, static_cast<int>(pos));
        keys[l].push_back(k);
        values[l].push_back(MatVec(Tensor(b + "attn_v.weight"), kKvHeads * kHeadDim, kEmbd, xn));
        Vec attn(kHeads * kHeadDim, 0.0);
        for (int h = 0; h < kHeads; ++h) {
          const int kh = h / (kHeads / kKvHeads);
          Vec score(pos + 1);
          double mx = -INFINITY, z = 0;
          for (size_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (int i = 0; i < kHeadDim; ++i)
              dot += q[h * kHeadDim + i] * keys[l][j][kh * kHeadDim + i];
            score[j] = dot / std::sqrt(double{kHeadDim});
            mx = std::max(mx, score[j]);
          }
          for (double& s : score) z += (s = std::exp(s - mx));
          for (size_t j = 0; j <= pos; ++j) {
            for (int i = 0; i < kHeadDim; ++i) {
              attn[h * kHeadDim + i] += score[j] / z * values[l][j][kh * kHeadDim + i];
            }
          }
        }
        const Vec o = MatVec(Tensor(b + "attn_output.weight"), kEmbd, kHeads * kHeadDim, attn);
        st[kAttnOut].push_back(Rms(o));
        for (int i = 0; i < kEmbd; ++i) x[i] += o[i];
        st[kXFfn].push_back(Rms(x));
        const Vec fn = RmsNorm(x, Tensor(b + "ffn_norm.weight"));
        Vec gate = MatVec(Tensor(b + "ffn_gate.weight"), kFf, kEmbd, fn);
        const Vec up = MatVec(Tensor(b + "ffn_up.weight"), kFf, kEmbd, fn);
        for (int i = 0; i < kFf; ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        const Vec f = MatVec(Tensor(b + "ffn_down.weight"), kEmbd, kFf, gate);
        st[kFfnOut].push_back(Rms(f));
        for (int i = 0; i < kEmbd; ++i) x[i] += f[i];
      }
      if (pos + 1 >= n_prompt && pos + 1 < ids.size()) {
        // Tied embeddings: logits = token_embd . norm(x).
        const Vec logits = MatVec(Tensor("token_embd.weight"), kVocab, kEmbd,
                                  RmsNorm(x, Tensor("output_norm.weight")));
        const int best =
            static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        ++checked;
        wrong += best != ids[pos + 1];
      }
    }
  }
  printf("self-check: %d of %d greedy ids differ from the reference\n", wrong, checked);
  for (int l = 0; l < kLayers; ++l) {
    printf("layer %d:", l);
    for (int s = 0; s < kNumStats; ++s) printf(" %s %.4f", kStatNames[s], Median(stats[l][s]));
    printf("\n");
  }
  return wrong == 0 ? 0 : 1;
}
