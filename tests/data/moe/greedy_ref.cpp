// llama.cpp greedy reference through libllama: for each prompt_ids of a reference JSON, decode
// the prompt, then 64 argmax tokens; logprob = logit - logsumexp (double); top 5. Settings as
// the shared references: 2 threads, F32 K/V, flash attention off, n_ctx = the model's.
// usage: greedy_ref MODEL.gguf PROMPTS.json OUT.json
// Build: g++ -O2 -std=c++17 greedy_ref.cpp -I<llama.cpp>/include -I<llama.cpp>/ggml/include
//        -L<llama build>/bin -lllama -lggml -lggml-base -Wl,-rpath,<llama build>/bin
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  nlohmann::json in = nlohmann::json::parse(std::ifstream(argv[2]));
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = llama_model_n_ctx_train(model);
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  nlohmann::json out;
  out["model"] = argv[1];
  out["engine"] =
      "llama.cpp libllama (llama_decode + argmax over the logits), greedy, 2 threads, F32 KV "
      "cache, no flash attention, n_ctx = the model's context length";
  out["n_predict"] = 64;
  out["cases"] = nlohmann::json::array();
  for (const auto& c : in["cases"]) {
    llama_memory_clear(llama_get_memory(ctx), true);
    std::vector<llama_token> toks = c["prompt_ids"].get<std::vector<llama_token>>();
    nlohmann::json oc;
    oc["prompt"] = c["prompt"];
    oc["prompt_ids"] = toks;
    std::vector<llama_token> gen;
    nlohmann::json steps = nlohmann::json::array();
    llama_batch batch = llama_batch_get_one(toks.data(), (int32_t)toks.size());
    for (int step = 0; step < 64; ++step) {
      if (llama_decode(ctx, batch) != 0) return 1;
      const float* logits = llama_get_logits_ith(ctx, -1);
      double mx = -INFINITY;
      for (int i = 0; i < n_vocab; ++i) mx = std::max(mx, (double)logits[i]);
      double sum = 0;
      for (int i = 0; i < n_vocab; ++i) sum += std::exp((double)logits[i] - mx);
      const double lse = mx + std::log(sum);
      std::vector<int> idx(n_vocab);
      for (int i = 0; i < n_vocab; ++i) idx[i] = i;
      std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      nlohmann::json top = nlohmann::json::array();
      for (int k = 0; k < 5; ++k) top.push_back({idx[k], (double)logits[idx[k]] - lse});
      llama_token t = idx[0];
      steps.push_back({{"id", t}, {"logprob", (double)logits[t] - lse}, {"top", top}});
      gen.push_back(t);
      static llama_token cur;
      cur = t;
      batch = llama_batch_get_one(&cur, 1);
    }
    oc["generated_ids"] = gen;
    oc["stop_type"] = "limit";
    oc["steps"] = steps;
    out["cases"].push_back(oc);
  }
  std::ofstream(argv[3]) << out.dump(1) << "\n";
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
