#include "engine/ops/kernel_calibration.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/ops/format_kernels.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/kernel_table.h"
#include "engine/ops/threading.h"
#include "spdlog/spdlog.h"

namespace textgen::ops {
namespace {

constexpr char kCacheHeader[] = "# textgen kernel choices v1";
constexpr int kTypeSlots = kWeightTypeCount;
constexpr int kRowsOf[kCallRowClasses] = {1, 4};
constexpr const char* kRowsName[kCallRowClasses] = {"1 row", "2-4 rows"};

std::array<std::array<std::atomic<const KernelTable*>, kCallRowClasses>, kTypeSlots> g_tables{};
std::mutex g_mu;
std::vector<MeasuredChoice> g_installed;  // guarded by g_mu

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model, stepping;
  while (std::getline(in, line) && (name.empty() || stepping.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (key == "model name") name = value;
    if (key == "cpu family") family = value;
    if (key == "model") model = value;
    if (key == "stepping") stepping = value;
  }
  return absl::StrCat(name, " (", family, "/", model, "/", stepping, ")");
}

// The binary: its size and modification time (a rebuild changes the kernels).
std::string BinaryId() {
  struct stat st {};
  if (stat("/proc/self/exe", &st) != 0) return "unknown";
  return absl::StrCat(st.st_size, ":", st.st_mtim.tv_sec);
}

std::string CacheKey(WeightType t, CallRows rows, absl::Span<const WeightView> measured,
                     absl::Span<const KernelTable* const> candidates, int threads) {
  int64_t bytes = 0;
  for (const WeightView& w : measured) bytes += static_cast<int64_t>(w.bytes());
  std::vector<std::string> levels;
  for (const KernelTable* k : candidates) levels.push_back(k->level);
  const char* cap = std::getenv("TEXTGEN_MAX_ISA");
  return absl::StrCat("cpu=", CpuModel(), ";exe=", BinaryId(), ";threads=", threads,
                      ";cap=", cap == nullptr ? "" : cap, ";levels=", absl::StrJoin(levels, ","),
                      ";type=", WeightTypeName(t), ";rows=", kRowsOf[static_cast<int>(rows)],
                      ";weights=", measured.size(), "x", bytes);
}

std::vector<std::pair<std::string, std::string>> ReadCache(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return internal::ParseKernelCache(text.str());
}

void WriteCache(const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& fresh) {
  if (path.empty() || fresh.empty()) return;
  std::vector<std::pair<std::string, std::string>> entries = ReadCache(path);
  for (const auto& entry : fresh) {
    // Not a structured binding: clang (the fuzz build) cannot capture one in a lambda.
    const std::string& key = entry.first;
    const std::string& level = entry.second;
    auto it =
        std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
    if (it != entries.end()) {
      it->second = level;
    } else {
      entries.emplace_back(key, level);
    }
  }
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << internal::FormatKernelCache(entries);
    if (!out) {
      spdlog::warn("kernel choices: cannot write the cache {}", path);
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) spdlog::warn("kernel choices: cannot write the cache {}: {}", path, ec.message());
}

// Up to kCalibrationBytes of `t`'s weights, in model order.
std::vector<WeightView> MeasuredWeights(absl::Span<const WeightView> weights, WeightType t) {
  std::vector<WeightView> out;
  int64_t bytes = 0;
  for (const WeightView& w : weights) {
    if (w.type != t || w.data == nullptr || bytes >= kCalibrationBytes) continue;
    out.push_back(w);
    bytes += static_cast<int64_t>(w.bytes());
  }
  return out;
}

// Times `candidates` on `measured` at `n` rows, alternating them round by round, until
// max_rounds or (after min_rounds) the deadline; per candidate the samples in microseconds.
// Each pass runs the candidate level's catalogue entry of the weights' format (all of `measured`
// are of one format), the one GemvMatmul runs in the fast mode.
std::vector<std::pair<std::string, std::vector<double>>> TimeCandidates(
    absl::Span<const WeightView> measured, absl::Span<const KernelTable* const> candidates,
    int64_t n, int threads, const CalibrationOptions& o,
    std::chrono::steady_clock::time_point deadline) {
  int64_t max_in = 0, max_out = 0;
  for (const WeightView& w : measured) {
    max_in = std::max(max_in, w.in);
    max_out = std::max(max_out, w.out);
  }
  std::vector<float> x(static_cast<size_t>(n * max_in)), y(static_cast<size_t>(n * max_out));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  auto run_pass = [&](const KernelTable& k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const WeightView& w : measured) {
      MatmulEntry(k, w.type, /*fast=*/true, Bf16DotInF32()).run(w, x.data(), n, y.data(), threads);
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  for (const KernelTable* k : candidates) run_pass(*k);  // page in the weights, size buffers
  std::vector<std::pair<std::string, std::vector<double>>> samples;
  for (const KernelTable* k : candidates) samples.emplace_back(k->level, std::vector<double>{});
  for (int round = 0; round < std::max(1, o.max_rounds); ++round) {
    if (round >= o.min_rounds && std::chrono::steady_clock::now() >= deadline) break;
    for (size_t j = 0; j < candidates.size(); ++j) {
      const size_t c = (j + static_cast<size_t>(round)) % candidates.size();  // rotate the order
      samples[c].second.push_back(run_pass(*candidates[c]));
    }
  }
  return samples;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

const KernelTable* TableNamed(absl::Span<const KernelTable* const> tables,
                              const std::string& level) {
  for (const KernelTable* k : tables) {
    if (level == k->level) return k;
  }
  return nullptr;
}

void Install(const MeasuredChoice& c, const KernelTable* table) {
  internal::InstallKernelChoice(c.type, c.rows, table);
  std::lock_guard<std::mutex> lock(g_mu);
  g_installed.push_back(c);
}

}  // namespace

absl::StatusOr<KernelSelectMode> KernelSelectModeFromEnv() {
  const char* v = std::getenv("TEXTGEN_KERNEL_SELECT");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "measure") {
    return KernelSelectMode::kMeasure;
  }
  if (std::string_view(v) == "table") return KernelSelectMode::kTable;
  return absl::InvalidArgumentError(
      absl::StrCat("TEXTGEN_KERNEL_SELECT=", v, " is not one of: measure, table"));
}

std::string DefaultKernelCachePath() {
  if (const char* v = std::getenv("TEXTGEN_KERNEL_CACHE"); v != nullptr && *v != '\0') {
    return std::string_view(v) == "off" ? "" : v;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return absl::StrCat(x, "/textgen/kernel-choices.tsv");
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return absl::StrCat(h, "/.cache/textgen/kernel-choices.tsv");
  }
  return "";
}

absl::Span<const WeightType> FormatsWithOneOrder() {
  // Read from the process level's catalogue (the tests check that every level agrees).
  static const std::vector<WeightType> one_order = [] {
    std::vector<WeightType> out;
    for (int i = 0; i < kWeightTypeCount; ++i) {
      const auto t = static_cast<WeightType>(i);
      if (FormatOf(internal::Kernels(), t).one_order) out.push_back(t);
    }
    return out;
  }();
  return one_order;
}

std::vector<MeasuredChoice> CalibrateKernels(absl::Span<const WeightView> weights,
                                             const CalibrationOptions& o) {
  return internal::CalibrateKernelsAmong(weights, o, internal::RunnableKernelTables());
}

namespace internal {

std::vector<MeasuredChoice> CalibrateKernelsAmong(absl::Span<const WeightView> weights,
                                                  const CalibrationOptions& o,
                                                  absl::Span<const KernelTable* const> candidates) {
  absl::StatusOr<KernelSelectMode> mode =
      o.mode.has_value() ? absl::StatusOr<KernelSelectMode>(*o.mode) : KernelSelectModeFromEnv();
  if (!mode.ok()) {
    spdlog::error("kernel choices: {}; measuring", std::string(mode.status().message()));
  }
  if ((mode.ok() && *mode == KernelSelectMode::kTable) || candidates.empty()) return {};
  const int threads = o.threads > 0 ? o.threads : NumThreads();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(o.budget_seconds * 1e6));
  const std::vector<std::pair<std::string, std::string>> cache = ReadCache(o.cache_path);
  std::vector<std::pair<std::string, std::string>> fresh;
  std::vector<MeasuredChoice> out;
  for (WeightType t : FormatsWithOneOrder()) {
    const std::vector<WeightView> measured = MeasuredWeights(weights, t);
    if (measured.empty()) continue;
    for (int r = 0; r < kCallRowClasses; ++r) {
      if (g_tables[static_cast<int>(t)][r].load() != nullptr) continue;  // an earlier model's
      MeasuredChoice c;
      c.type = t;
      c.rows = static_cast<CallRows>(r);
      const std::string key = CacheKey(t, c.rows, measured, candidates, threads);
      auto hit =
          std::find_if(cache.begin(), cache.end(), [&](const auto& e) { return e.first == key; });
      if (candidates.size() == 1) {
        c.level = candidates[0]->level;
      } else if (hit != cache.end() && TableNamed(candidates, hit->second) != nullptr) {
        c.level = hit->second;
        c.from_cache = true;
      } else {
        const auto samples = TimeCandidates(measured, candidates, kRowsOf[r], threads, o, deadline);
        for (const auto& [level, s] : samples) c.median_us.emplace_back(level, Median(s));
        c.level = internal::ChooseByMedian(samples, candidates.back()->level, o.margin);
        fresh.emplace_back(key, c.level);
      }
      Install(c, TableNamed(candidates, c.level));
      spdlog::info("kernel choice: {}", DescribeChoice(c));
      out.push_back(std::move(c));
    }
  }
  WriteCache(o.cache_path, fresh);
  return out;
}

}  // namespace internal

std::vector<MeasuredChoice> InstalledKernelChoices() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_installed;
}

std::string DescribeChoice(const MeasuredChoice& c) {
  std::string s =
      absl::StrCat(WeightTypeName(c.type), " ", kRowsName[static_cast<int>(c.rows)], ": ", c.level);
  if (c.from_cache) return s + " (cached)";
  if (c.median_us.empty()) return s + " (the only level here)";
  std::vector<std::string> parts;
  for (const auto& [level, us] : c.median_us) {
    parts.push_back(absl::StrCat(level, " ", static_cast<int64_t>(us + 0.5), " us"));
  }
  return absl::StrCat(s, " (measured medians: ", absl::StrJoin(parts, ", "), ")");
}

namespace internal {

const KernelTable& KernelsFor(WeightType t, int64_t rows) {
  const int slot = static_cast<int>(t);
  if (rows <= 4 && slot >= 0 && slot < kTypeSlots) {
    const KernelTable* k = g_tables[slot][rows == 1 ? 0 : 1].load(std::memory_order_acquire);
    if (k != nullptr) return *k;
  }
  return Kernels();
}

void InstallKernelChoice(WeightType t, CallRows rows, const KernelTable* table) {
  const int slot = static_cast<int>(t);
  if (slot < 0 || slot >= kTypeSlots) return;
  g_tables[slot][static_cast<int>(rows)].store(table, std::memory_order_release);
  if (table == nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    std::erase_if(g_installed,
                  [&](const MeasuredChoice& c) { return c.type == t && c.rows == rows; });
  }
}

std::string ChooseByMedian(const std::vector<std::pair<std::string, std::vector<double>>>& samples,
                           const std::string& incumbent, double margin) {
  std::string best;
  double best_median = 0, incumbent_median = -1;
  for (const auto& [level, s] : samples) {
    const double m = Median(s);
    if (best.empty() || m < best_median) {
      best = level;
      best_median = m;
    }
    if (level == incumbent) incumbent_median = m;
  }
  if (incumbent_median >= 0 && incumbent_median <= best_median * (1 + margin)) return incumbent;
  return best;
}

std::vector<std::pair<std::string, std::string>> ParseKernelCache(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != kCacheHeader) return entries;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], '\t');
    if (f.size() != 2 || f[0].empty() || f[1].empty()) continue;
    entries.emplace_back(f[0], f[1]);
  }
  return entries;
}

std::string FormatKernelCache(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out = absl::StrCat(kCacheHeader, "\n");
  for (const auto& [key, level] : entries) {
    if (key.find_first_of("\t\n") != std::string::npos) continue;
    absl::StrAppend(&out, key, "\t", level, "\n");
  }
  return out;
}

}  // namespace internal
}  // namespace textgen::ops
