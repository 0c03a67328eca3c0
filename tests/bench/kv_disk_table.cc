#include "tests/bench/kv_disk_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/scheduler/engine.h"
#include "tests/bench/bench_util.h"

namespace textgen::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Times one request: submission to first token, and first to last token.
class KvDiskSink : public GenerationSink {
 public:
  KvDiskSink() : submitted_(Clock::now()) {}
  void OnDelta(const StreamDelta& d) override {
    if (d.tokens.empty()) return;
    absl::MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    if (!first_.has_value()) first_ = now;
    last_ = now;
    tokens_ += static_cast<int>(d.tokens.size());
  }
  void OnDone(absl::StatusOr<GenerationResult> r) override {
    if (!r.ok()) Die("a benchmark request failed: " + r.status().ToString());
    if (!r->hypotheses.empty()) answer_ = r->hypotheses[0].ids;
    done_.Notify();
  }
  // The generated ids.
  const std::vector<int32_t>& Answer() {
    done_.WaitForNotification();
    return answer_;
  }
  double Ttft() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    return std::chrono::duration<double>(*first_ - submitted_).count();
  }
  // Seconds per token after the first.
  double DecodeSecondsPerToken() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    if (tokens_ < 2) Die("a benchmark request streamed fewer than 2 tokens");
    return std::chrono::duration<double>(last_ - *first_).count() / (tokens_ - 1);
  }

 private:
  const Clock::time_point submitted_;
  absl::Mutex mu_;
  std::optional<Clock::time_point> first_;
  Clock::time_point last_;
  int tokens_ = 0;
  std::vector<int32_t> answer_;
  absl::Notification done_;
};

std::shared_ptr<KvDiskSink> Submit(Engine& e, const std::vector<int32_t>& prompt, int new_tokens);

// A fresh engine that has served one short request (its first request's one-time costs, e.g.
// kernel choices measured at first use, are not what is measured here).
std::unique_ptr<Engine> MakeEngine(const BenchOptions& o, const std::string& state_dir) {
  EngineOptions e;
  e.model_path = o.prefix_model;
  e.model.llama.linear.compute = o.compute;
  e.model.threads = o.threads;
  if (o.kernel_select.has_value()) e.model.llama.kernel_select = *o.kernel_select;
  e.kv_prefault = o.kv_prefault;
  if (o.kv_disk_cache_mib > 0) e.kv_cache_mib = o.kv_disk_cache_mib;
  e.state_dir = state_dir;
  e.kv_disk_gib = state_dir.empty() ? 0 : 64;
  auto engine = Engine::Create(e);
  if (!engine.ok()) Die(o.prefix_model + ": " + engine.status().ToString());
  const int vocab = (*engine)->model().config().n_vocab;
  Submit(**engine, RandomPrompt(48, vocab, o.seed + 99), 4)->Ttft();
  return std::move(engine).value();
}

std::shared_ptr<KvDiskSink> Submit(Engine& e, const std::vector<int32_t>& prompt, int new_tokens) {
  EngineRequest r;
  r.prompt_ids = prompt;
  r.decoding.max_new_tokens = new_tokens;
  r.decoding.ignore_eos = true;
  auto sink = std::make_shared<KvDiskSink>();
  if (absl::Status s = e.Submit(std::move(r), sink).status(); !s.ok()) Die(s.ToString());
  return sink;
}

// Writes the files out and drops them from the page cache (no root needed for our own files).
void DropPageCache(const std::string& dir) {
  for (const auto& f : fs::directory_iterator(dir)) {
    const int fd = open(f.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

struct Ttfts {
  double recompute = 1e30, warm = 1e30, disk = 1e30, cold = 1e30, spill = 1e30;
  int64_t blocks = 0, bytes = 0;
};

// A conversation's next turn: `prompt` (the conversation so far, computed in full by the first
// engine, which is then shut down and writes its blocks), its answer, then a new user message.
// Every measured turn has a message of its own, so that none finds blocks another measured
// turn computed: a second engine on the directory serves one (after a restart, page cache
// warm), then another (warm: the conversation's blocks are in its memory now); after dropping
// the page cache a third engine serves a third (page cache dropped).
void MeasureTtft(const BenchOptions& o, const std::vector<int32_t>& prompt,
                 const std::vector<std::vector<int32_t>>& turns, Ttfts* t) {
  const std::string dir = absl::StrFormat("/tmp/textgen-bench-kv-disk-%d", getpid());
  fs::remove_all(dir);
  std::vector<int32_t> conversation = prompt;
  {
    auto a = MakeEngine(o, dir);
    std::shared_ptr<KvDiskSink> first = Submit(*a, prompt, 8);
    t->recompute = std::min(t->recompute, first->Ttft());
    conversation.insert(conversation.end(), first->Answer().begin(), first->Answer().end());
    const Clock::time_point start = Clock::now();
    a.reset();  // shutdown: the cached blocks are written
    t->spill = std::min(t->spill, std::chrono::duration<double>(Clock::now() - start).count());
  }
  auto next = [&](int i) {
    std::vector<int32_t> p = conversation;
    p.insert(p.end(), turns[i].begin(), turns[i].end());
    return p;
  };
  auto read_back = [&](Engine& e) {
    const EngineStats s = e.Stats();
    if (s.kv_disk_blocks_read == 0) Die("the restarted engine read nothing from the disk tier");
    t->blocks = s.kv_disk_blocks_read;
    t->bytes = s.kv_disk_bytes;
  };
  {
    auto b = MakeEngine(o, dir);
    t->disk = std::min(t->disk, Submit(*b, next(0), 8)->Ttft());
    read_back(*b);
    t->warm = std::min(t->warm, Submit(*b, next(1), 8)->Ttft());
  }
  DropPageCache(dir + "/kv");
  {
    auto c = MakeEngine(o, dir);
    t->cold = std::min(t->cold, Submit(*c, next(2), 8)->Ttft());
    read_back(*c);
  }
  fs::remove_all(dir);
}

void PrintTtftRows(const BenchOptions& o, const std::string& name, int vocab) {
  const int n = o.kv_disk_tokens;
  const std::vector<int32_t> prompt = RandomPrompt(n, vocab, o.seed);
  std::vector<std::vector<int32_t>> turns;
  for (int i = 0; i < 3; ++i) turns.push_back(RandomPrompt(16, vocab, o.seed + 7 + i));
  Ttfts t;
  for (int r = 0; r < o.repeats; ++r) MeasureTtft(o, prompt, turns, &t);
  if (!o.rows_only) {
    absl::PrintF(
        "| %s, next turn of a %d-token conversation, best of %d | TTFT s | / warm | "
        "recompute / this |\n"
        "|---|---|---|---|\n",
        name, n, o.repeats);
  }
  auto row = [&](const char* what, double s) {
    absl::PrintF("| %s | %.3f | %.2fx | %.1fx |\n", what, s, s / t.warm, t.recompute / s);
  };
  row("recompute (the conversation, nothing cached)", t.recompute);
  row("warm (next turn, prefix cache in memory)", t.warm);
  row("next turn after a restart, from the disk tier (page cache warm)", t.disk);
  row("next turn after a restart, from the disk tier (page cache dropped)", t.cold);
  absl::PrintF(
      "| shutdown writing the cache (%lld blocks read back, %.0f MiB on disk) | %.3f | | |\n",
      static_cast<long long>(t.blocks), t.bytes / 1048576.0, t.spill);
}

void PrintDecodeRows(const BenchOptions& o, const std::string& name, int vocab) {
  // Decode with nothing to spill: the tier's only cost is its existence.
  const std::vector<int32_t> short_prompt = RandomPrompt(128, vocab, o.seed + 1);
  double on = 1e30, off = 1e30;
  const std::string dir = absl::StrFormat("/tmp/textgen-bench-kv-disk-decode-%d", getpid());
  for (int r = 0; r < o.repeats; ++r) {
    for (bool tier : {r % 2 == 0, r % 2 != 0}) {
      fs::remove_all(dir);
      auto e = MakeEngine(o, tier ? dir : "");
      const double s = Submit(*e, short_prompt, 256)->DecodeSecondsPerToken();
      (tier ? on : off) = std::min(tier ? on : off, s);
    }
  }
  fs::remove_all(dir);
  absl::PrintF(
      "\n| %s decode, 128-token prompt, 256 new tokens, best of %d | ms/token |\n|---|---|\n"
      "| tier off | %.3f |\n| tier on, nothing to spill | %.3f (%+.1f%%) |\n",
      name, o.repeats, off * 1e3, on * 1e3, (on / off - 1) * 100);
}

}  // namespace

void PrintKvDiskTable(const BenchOptions& o) {
  std::string name;
  int vocab = 0;
  {
    auto probe = MakeEngine(o, "");
    name = DisplayName(probe->model());
    vocab = probe->model().config().n_vocab;
  }
  if (!o.kv_disk_decode_only) PrintTtftRows(o, name, vocab);
  PrintDecodeRows(o, name, vocab);
}

}  // namespace textgen::bench
