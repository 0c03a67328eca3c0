#include "engine/decoding/generator.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/ops/softmax.h"
#include "engine/util/status_macros.h"

namespace textgen {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
  }
  return "unknown";
}

absl::StatusOr<GenerationResult> GenerateGreedy(LlamaModel& model, KvCache& cache,
                                                absl::Span<const int32_t> prompt, int32_t eos_id,
                                                const GenerateOptions& options,
                                                const TokenCallback& on_token) {
  const ModelConfig& c = model.config();
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: must hold at least one token");
  if (options.max_new_tokens < 0) {
    return absl::InvalidArgumentError("max_new_tokens: must be >= 0");
  }
  const int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (needed > c.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt.size(), " tokens) + max_new_tokens (", options.max_new_tokens,
        ") = ", needed, " exceeds the model's context of ", c.n_ctx, " tokens"));
  }
  using Clock = std::chrono::steady_clock;
  GenerationResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  std::vector<float> logits;
  std::vector<double> logprobs(c.n_vocab);
  BlockTable table;
  // Frees the table on every exit path.
  struct TableGuard {
    KvCache& cache;
    BlockTable& table;
    ~TableGuard() { cache.Free(table); }
  } guard{cache, table};

  auto t0 = Clock::now();
  auto t_prefill = t0;
  for (int step = 0; step < options.max_new_tokens; ++step) {
    ForwardSeq fs;
    if (options.use_cache) {
      // First step: the whole prompt; later: only the token chosen last.
      fs.tokens = step == 0 ? absl::MakeConstSpan(seq) : absl::MakeConstSpan(&seq.back(), 1);
      fs.pos0 = table.num_tokens;
    } else {
      cache.Free(table);
      fs.tokens = absl::MakeConstSpan(seq);
      fs.pos0 = 0;
    }
    fs.table = &table;
    TG_RETURN_IF_ERROR(model.Forward(cache, absl::MakeSpan(&fs, 1), &logits));
    const int32_t next = static_cast<int32_t>(ops::ArgMax(logits.data(), c.n_vocab));
    ops::LogSoftmax(logits.data(), c.n_vocab, logprobs.data());
    if (step == 0) t_prefill = Clock::now();
    result.ids.push_back(next);
    result.logprobs.push_back(logprobs[next]);
    seq.push_back(next);
    if (on_token) on_token(next, logprobs[next]);
    if (next == eos_id && !options.ignore_eos) {
      result.finish_reason = FinishReason::kEos;
      break;
    }
  }
  auto t_end = Clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t_prefill - t0).count();
  result.decode_seconds = std::chrono::duration<double>(t_end - t_prefill).count();
  return result;
}

}  // namespace textgen
