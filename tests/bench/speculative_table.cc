#include "tests/bench/speculative_table.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "engine/scheduler/engine.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Stories' openings: the TinyStories models continue them with the repetitive text that
// prompt lookup drafts from.
const std::vector<std::string> kPrompts = {
    "Once upon a time, there was a little girl named Lily.",
    "Tom had a big red ball. One day, he",
    "The sun was hot and the children wanted to swim",
    "There was a little bird who could not fly",
};

struct Mode {
  std::string name;
  DraftSource source = DraftSource::kNone;
  bool adaptive = false;
};

class WaitSink : public GenerationSink {
 public:
  void OnDelta(const StreamDelta&) override {}
  void OnDone(absl::StatusOr<GenerationResult> r) override {
    if (!r.ok()) Die("a benchmark request failed: " + r.status().ToString());
    result_ = *std::move(r);
    done_.Notify();
  }
  GenerationResult Wait() {
    done_.WaitForNotification();
    return std::move(result_);
  }

 private:
  GenerationResult result_;
  absl::Notification done_;
};

GenerationResult RunOne(Engine& engine, const std::string& prompt, const Mode& mode,
                        const BenchOptions& o) {
  EngineRequest r;
  r.prompt_text = prompt;
  r.decoding.max_new_tokens = o.speculative_tokens;
  r.decoding.ignore_eos = true;
  r.decoding.speculation.source = mode.source;
  r.decoding.speculation.adaptive = mode.adaptive;
  r.decoding.speculation.max_draft_tokens = o.speculative_k;
  auto sink = std::make_shared<WaitSink>();
  if (absl::Status s = engine.Submit(std::move(r), sink).status(); !s.ok()) Die(s.ToString());
  return sink->Wait();
}

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

struct ModeResult {
  double best_s = 1e30;                       // the best round's total over the prompts
  int tokens = 0, drafted = 0, accepted = 0;  // per round (the same every round)
  bool same_ids = true;
};

}  // namespace

void PrintSpeculativeTable(const BenchOptions& o) {
  if (!o.rows_only) {
    absl::PrintF(
        "| model | draft model | compute | threads | mode | ms / request | tokens/s | drafted | "
        "accepted | vs off | same ids |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<Mode> modes = {{"off", DraftSource::kNone, false},
                             {"ngram, K fixed", DraftSource::kNgram, false},
                             {"ngram, adaptive", DraftSource::kNgram, true}};
  if (!o.draft_model.empty()) {
    modes.push_back({"draft model, K fixed", DraftSource::kDraftModel, false});
    modes.push_back({"draft model, adaptive", DraftSource::kDraftModel, true});
  }
  for (const std::string& path : o.models) {
    EngineOptions e;
    e.model_path = path;
    e.model.llama.linear.compute = o.compute;
    e.model.llama.linear.batch_invariant = o.batch_invariant;
    e.model.threads = o.threads;
    e.draft_model_path = o.draft_model;
    auto engine = Engine::Create(e);
    if (!engine.ok()) Die(path + ": " + engine.status().ToString());
    std::vector<ModeResult> results(modes.size());
    std::vector<std::vector<int32_t>> off_ids(kPrompts.size());
    // One untimed round warms the caches and the row cost model; then the timed rounds.
    for (int round = -1; round < o.repeats; ++round) {
      for (size_t m = 0; m < modes.size(); ++m) {
        ModeResult& res = results[m];
        ModeResult now;
        const Clock::time_point start = Clock::now();
        for (size_t p = 0; p < kPrompts.size(); ++p) {
          GenerationResult g = RunOne(**engine, kPrompts[p], modes[m], o);
          now.tokens += g.stats.generated_tokens;
          now.drafted += g.stats.drafted_tokens;
          now.accepted += g.stats.accepted_tokens;
          if (m == 0 && round < 0) off_ids[p] = g.hypotheses[0].ids;
          if (g.hypotheses[0].ids != off_ids[p]) res.same_ids = false;
        }
        if (round < 0) continue;
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        if (s < res.best_s) {
          res.best_s = s;
          res.tokens = now.tokens;
          res.drafted = now.drafted;
          res.accepted = now.accepted;
        }
      }
    }
    for (size_t m = 0; m < modes.size(); ++m) {
      const ModeResult& r = results[m];
      absl::PrintF("| %s | %s | %s | %d | %s | %.1f | %.0f | %d | %d | %.2fx | %s |\n",
                   FileName(path), o.draft_model.empty() ? "-" : FileName(o.draft_model),
                   ComputeName(o.compute), o.threads, modes[m].name,
                   1e3 * r.best_s / kPrompts.size(), r.tokens / r.best_s, r.drafted, r.accepted,
                   results[0].best_s / r.best_s, r.same_ids ? "yes" : "**no**");
    }
  }
}

}  // namespace textgen::bench
