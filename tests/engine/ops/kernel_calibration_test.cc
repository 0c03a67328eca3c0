// Kernels chosen by measurement: the choice rule, the cache file, the calibration on real
// kernels at every level this CPU runs, and that every candidate level gives the same bytes.
#include "engine/ops/kernel_calibration.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/format_kernels.h"
#include "engine/ops/gemv_matmul.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/kernel_table.h"
#include "tests/engine/ops/ops_test_util.h"
#include "tests/engine/ops/weight_test_util.h"

namespace textgen::ops {
namespace kernel_calibration_test {

using Samples = std::vector<std::pair<std::string, std::vector<double>>>;

TEST_CASE("ChooseByMedian: the lowest median wins, outliers do not count") {
  const Samples s = {{"avx2", {100, 101, 500, 99, 100}}, {"avx512", {90, 91, 89, 400, 90}}};
  CHECK(internal::ChooseByMedian(s, "avx2", 0.03) == "avx512");
  // One slow outlier of the faster level does not flip it.
  const Samples t = {{"avx2", {100, 100, 100}}, {"avx512", {80, 900, 81}}};
  CHECK(internal::ChooseByMedian(t, "avx2", 0.03) == "avx512");
}

TEST_CASE("ChooseByMedian: the incumbent stays within the margin") {
  const Samples s = {{"avx2", {100, 100, 100}}, {"avx512vnni", {102, 102, 102}}};
  CHECK(internal::ChooseByMedian(s, "avx512vnni", 0.03) == "avx512vnni");
  CHECK(internal::ChooseByMedian(s, "avx512vnni", 0.01) == "avx2");
  // An incumbent that was not measured cannot stay.
  CHECK(internal::ChooseByMedian(s, "amx", 0.5) == "avx2");
}

TEST_CASE("the kernel cache: what Format writes Parse reads, anything else is ignored") {
  const std::vector<std::pair<std::string, std::string>> entries = {
      {"cpu=A;type=q8_0;rows=1", "avx2"}, {"cpu=A;type=q8_0;rows=4", "avx512vnni"}};
  const std::string text = internal::FormatKernelCache(entries);
  CHECK(internal::ParseKernelCache(text) == entries);
  // Torn or edited lines are skipped, the rest kept.
  CHECK(internal::ParseKernelCache(text + "half a line\nk\t\n\tv\na\tb\tc\n") == entries);
  // Another header (an older or foreign file) or none: nothing.
  CHECK(internal::ParseKernelCache("# textgen kernel choices v0\nk\tavx2\n").empty());
  CHECK(internal::ParseKernelCache("k\tavx2\n").empty());
  CHECK(internal::ParseKernelCache("").empty());
  std::string binary(64, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 37);
  CHECK(internal::ParseKernelCache(binary).empty());
  // A key that would break the format is not written.
  CHECK(internal::ParseKernelCache(internal::FormatKernelCache({{"a\tb", "avx2"}})).empty());
}

// Environment variables set for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_CASE("TEXTGEN_KERNEL_SELECT and TEXTGEN_KERNEL_CACHE") {
  {
    ScopedEnv e("TEXTGEN_KERNEL_SELECT", "table");
    CHECK(*KernelSelectModeFromEnv() == KernelSelectMode::kTable);
  }
  {
    ScopedEnv e("TEXTGEN_KERNEL_SELECT", "fastest");
    CHECK(absl::IsInvalidArgument(KernelSelectModeFromEnv().status()));
  }
  {
    ScopedEnv e("TEXTGEN_KERNEL_SELECT", "");
    CHECK(*KernelSelectModeFromEnv() == KernelSelectMode::kMeasure);
  }
  {
    ScopedEnv e("TEXTGEN_KERNEL_CACHE", "off");
    CHECK(DefaultKernelCachePath().empty());
  }
  {
    ScopedEnv e("TEXTGEN_KERNEL_CACHE", "");
    ScopedEnv x("XDG_CACHE_HOME", "/var/cache/u");
    CHECK(DefaultKernelCachePath() == "/var/cache/u/textgen/kernel-choices.tsv");
  }
}

// Q8_0 weights of a few real shapes, ~3 MB.
struct Weights {
  std::vector<std::vector<BlockQ8_0>> data;
  std::vector<WeightView> views;
};
Weights MakeWeights() {
  Weights w;
  const std::pair<int64_t, int64_t> shapes[] = {{768, 768}, {2048, 768}, {768, 2048}};
  uint32_t seed = 3;
  for (auto [out, in] : shapes)
    w.data.push_back(testing::RandomBlocks(out * in / 32, ++seed, 0.05f));
  for (size_t i = 0; i < w.data.size(); ++i) {
    w.views.push_back({WeightType::kQ8_0, w.data[i].data(), shapes[i].first, shapes[i].second});
  }
  return w;
}

// Removes every installed choice (the process-wide state) around a test.
struct ClearChoices {
  ClearChoices() { Clear(); }
  ~ClearChoices() { Clear(); }
  static void Clear() {
    for (WeightType t : FormatsWithOneOrder()) {
      for (int r = 0; r < kCallRowClasses; ++r) {
        internal::InstallKernelChoice(t, static_cast<CallRows>(r), nullptr);
      }
    }
  }
};

TEST_CASE("CalibrateKernels picks a level this CPU runs for every shape, then reads the cache") {
  ClearChoices clear;
  const Weights w = MakeWeights();
  char tmpl[] = "/tmp/textgen-kernel-calibration-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  CalibrationOptions o;
  o.cache_path = dir + "/sub/choices.tsv";  // the directory is made
  o.budget_seconds = 0.5;
  o.threads = 1;
  const absl::Span<const KernelTable* const> runnable = internal::RunnableKernelTables();
  const std::vector<MeasuredChoice> first = CalibrateKernels(w.views, o);
  REQUIRE(first.size() == kCallRowClasses);
  for (const MeasuredChoice& c : first) {
    INFO(DescribeChoice(c));
    CHECK(c.type == WeightType::kQ8_0);
    CHECK_FALSE(c.from_cache);
    bool runs_here = false;
    for (const KernelTable* k : runnable) runs_here |= c.level == k->level;
    CHECK(runs_here);
    // Measured wherever there is a choice, every candidate timed.
    CHECK(c.median_us.size() == (runnable.size() > 1 ? runnable.size() : 0));
    CHECK(&internal::KernelsFor(WeightType::kQ8_0, c.rows == CallRows::kOne ? 1 : 3) == [&] {
      for (const KernelTable* k : runnable) {
        if (c.level == k->level) return k;
      }
      return runnable.back();
    }());
  }
  CHECK(InstalledKernelChoices().size() == kCallRowClasses);
  // Formats chosen once stay chosen in this process.
  CHECK(CalibrateKernels(w.views, o).empty());
  ClearChoices::Clear();
  if (runnable.size() > 1) {
    // A restart: the same choices from the cache, nothing measured.
    const std::vector<MeasuredChoice> second = CalibrateKernels(w.views, o);
    REQUIRE(second.size() == first.size());
    for (size_t i = 0; i < second.size(); ++i) {
      CHECK(second[i].from_cache);
      CHECK(second[i].median_us.empty());
      CHECK(second[i].level == first[i].level);
    }
  }
  ClearChoices::Clear();
  {
    // An unreadable cache (a directory in its place) is ignored: measured again, no crash.
    CalibrationOptions bad = o;
    bad.cache_path = dir;
    CHECK(CalibrateKernels(w.views, bad).size() == kCallRowClasses);
  }
  ClearChoices::Clear();
  {
    ScopedEnv e("TEXTGEN_KERNEL_SELECT", "table");
    CHECK(CalibrateKernels(w.views, o).empty());
    CHECK(&internal::KernelsFor(WeightType::kQ8_0, 1) == &internal::Kernels());
  }
  // No weight of a measured format: nothing to choose.
  const WeightView f32{WeightType::kF32, w.data[0].data(), 8, 32};
  CHECK(CalibrateKernels({&f32, 1}, o).empty());
  std::filesystem::remove_all(dir);
}

// The measuring path on any machine: this level's table and a copy under another name (the
// same kernels) are timed, one is chosen and cached, and a restart reads it back.
TEST_CASE("CalibrateKernelsAmong measures every candidate, caches, and keeps an incumbent tie") {
  ClearChoices clear;
  const Weights w = MakeWeights();
  char tmpl[] = "/tmp/textgen-kernel-measure-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  KernelTable twin = internal::Kernels();
  twin.level = "twin";
  const KernelTable* candidates[] = {&internal::Kernels(), &twin};
  CalibrationOptions o;
  o.cache_path = dir + "/choices.tsv";
  o.budget_seconds = 0.3;
  o.min_rounds = 3;
  o.max_rounds = 5;
  o.margin = 0.5;  // the same kernels: within 50% the incumbent (the last, "twin") stays
  o.threads = 1;
  const std::vector<MeasuredChoice> first = internal::CalibrateKernelsAmong(w.views, o, candidates);
  REQUIRE(first.size() == kCallRowClasses);
  for (const MeasuredChoice& c : first) {
    INFO(DescribeChoice(c));
    CHECK(c.level == "twin");
    REQUIRE(c.median_us.size() == 2);
    CHECK(c.median_us[0].first == internal::Kernels().level);
    CHECK(c.median_us[0].second > 0);
    CHECK(c.median_us[1].second > 0);
    CHECK(DescribeChoice(c).find("measured medians") != std::string::npos);
  }
  CHECK(&internal::KernelsFor(WeightType::kQ8_0, 1) == &twin);
  ClearChoices::Clear();
  const std::vector<MeasuredChoice> second =
      internal::CalibrateKernelsAmong(w.views, o, candidates);
  REQUIRE(second.size() == kCallRowClasses);
  for (const MeasuredChoice& c : second) {
    CHECK(c.from_cache);
    CHECK(c.level == "twin");
  }
  ClearChoices::Clear();
  // A cache naming a level this process cannot run (another machine's file, edited) is
  // ignored: measured again.
  {
    std::ofstream out(o.cache_path, std::ios::trunc);
    out << "# textgen kernel choices v1\n";
  }
  const KernelTable* only_real[] = {&internal::Kernels(), &twin};
  twin.level = "twin2";  // the cached "twin" no longer exists
  const std::vector<MeasuredChoice> third = internal::CalibrateKernelsAmong(w.views, o, only_real);
  REQUIRE(third.size() == kCallRowClasses);
  for (const MeasuredChoice& c : third) CHECK_FALSE(c.from_cache);
  ClearChoices::Clear();
  std::filesystem::remove_all(dir);
}

// The choice changes speed, never answers: every candidate level runs the Q8_0 matmul to the
// same bytes, for decode, beam and prefill-sized calls.
TEST_CASE("every level this CPU runs gives the same Q8_0 bytes through GemvMatmul") {
  ClearChoices clear;
  const Weights w = MakeWeights();
  const WeightView& view = w.views[1];
  for (int64_t n : {1, 3, 4, 9}) {
    const std::vector<float> x = testing::Random(n * view.in, 40 + n);
    std::vector<float> want;
    for (const KernelTable* k : internal::RunnableKernelTables()) {
      INFO("level " << k->level << " n " << n);
      std::vector<float> y(n * view.out, -1.0f);
      MatmulEntry(*k, WeightType::kQ8_0, /*fast=*/true, Bf16DotInF32())
          .run(view, x.data(), n, y.data(), 2);
      if (want.empty()) want = y;
      CHECK(std::memcmp(want.data(), y.data(), y.size() * sizeof(float)) == 0);
      if (n <= 4) {
        // Linear's path with this level installed for the call's shape.
        internal::InstallKernelChoice(WeightType::kQ8_0, n == 1 ? CallRows::kOne : CallRows::kFew,
                                      k);
        GemvMatmul gemv(view, LinearCompute::kBf16, 0);
        std::vector<float> y2(n * view.out, -2.0f);
        REQUIRE(gemv.Run(x.data(), n, y2.data()).ok());
        CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace kernel_calibration_test
}  // namespace textgen::ops
