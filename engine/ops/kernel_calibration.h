// Kernels chosen per CPU by measurement, not by instruction-set name.
//
// The fastest level for a weight format is not always the highest one the CPU has: on an AMD
// EPYC (Zen 5) the VNNI column-lane decode kernels measured half the speed of the AVX2/AVX-512
// ones that Intel CPUs run slower (docs/kernels.md). So after a model loads, for each weight
// format whose kernels give the same bytes at every level (so the choice changes speed, never an
// answer: Q8_0 so far, see FormatsWithOneOrder), each call shape that differs (1 activation row:
// decode; 2-4: beams and a few streams) is timed at every level this process may run, on the
// model's own weights of that format, as decode reads them (from memory, all threads, up to
// kCalibrationBytes per pass), candidates alternated round by round; the level with the lowest
// median wins unless the incumbent (the highest level, as the table would choose) is within
// `margin`, so that noise does not flip the choice. Bounded by `budget_seconds` (2 s), and the
// result is cached per CPU model, binary, thread count, cap and weight shapes in a small text
// file (TEXTGEN_KERNEL_CACHE, default $XDG_CACHE_HOME/textgen/kernel-choices.tsv), so a restart
// measures nothing. An unreadable, foreign or malformed cache is ignored and rewritten.
// TEXTGEN_KERNEL_SELECT=table skips all of it (the highest level runs every format).
// Prefill-sized calls (5+ rows) keep the table's level: not measured yet.
#ifndef TEXTGEN_ENGINE_OPS_KERNEL_CALIBRATION_H_
#define TEXTGEN_ENGINE_OPS_KERNEL_CALIBRATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

struct KernelTable;

enum class KernelSelectMode { kMeasure, kTable };

// TEXTGEN_KERNEL_SELECT: measure (default) or table; InvalidArgument for anything else.
absl::StatusOr<KernelSelectMode> KernelSelectModeFromEnv();

// TEXTGEN_KERNEL_CACHE if set ("off": no cache, ""), else $XDG_CACHE_HOME/textgen/
// kernel-choices.tsv, else $HOME/.cache/textgen/kernel-choices.tsv, else "".
std::string DefaultKernelCachePath();

// The call shapes measured: activation rows per call.
enum class CallRows { kOne = 0, kFew = 1 };  // 1 row; 2-4 rows (timed at 4)
constexpr int kCallRowClasses = 2;

// One decision: which level runs a format's calls of one shape.
struct MeasuredChoice {
  WeightType type = WeightType::kF32;
  CallRows rows = CallRows::kOne;
  std::string level;
  // Median microseconds per pass over the measured weights, per candidate level (empty when
  // the choice came from the cache or only one level runs here).
  std::vector<std::pair<std::string, double>> median_us;
  bool from_cache = false;
};

struct CalibrationOptions {
  // --kernel-select; unset: TEXTGEN_KERNEL_SELECT (KernelSelectModeFromEnv), measure when that
  // is invalid (logged).
  std::optional<KernelSelectMode> mode;
  double budget_seconds = 2.0;  // the whole calibration, every format and shape
  int min_rounds = 3;           // rounds (one pass per candidate) before the budget may stop it
  int max_rounds = 9;
  double margin = 0.03;    // a challenger must be this much faster than the incumbent
  std::string cache_path;  // "" = no cache
  int threads = 0;         // 0 = NumThreads()
};

// Weights of a pass: up to this many bytes of a format's matrices (enough to stream from
// memory past any L3 the tests meet; a 1B model's Q8_0 is ~1 GB, a pass here ~16 ms).
constexpr int64_t kCalibrationBytes = int64_t{256} << 20;

// The formats whose fast-mode kernels give the same bytes at every level (tests check each).
absl::Span<const WeightType> FormatsWithOneOrder();

// Measures (or reads from the cache) and installs a level for each format of
// FormatsWithOneOrder() present in `weights` and each call shape; returns the choices, also
// logged. Installs nothing in the table mode (options.mode, else TEXTGEN_KERNEL_SELECT=table).
// Formats already chosen in this process (an earlier model) keep their choice.
std::vector<MeasuredChoice> CalibrateKernels(absl::Span<const WeightView> weights,
                                             const CalibrationOptions& options);

// The installed choices, for logs and benchmarks.
std::vector<MeasuredChoice> InstalledKernelChoices();

// "q8_0 1 row: avx2 (measured: avx2 812 us, avx512 790 us)" or "... (cached)".
std::string DescribeChoice(const MeasuredChoice& c);

namespace internal {

// The table that runs format `t` for calls of `rows` activation rows: the installed choice,
// else the process's level (Kernels()).
const KernelTable& KernelsFor(WeightType t, int64_t rows);

// CalibrateKernels among `candidates` (lowest first; the last is the incumbent) instead of
// RunnableKernelTables() (tests).
std::vector<MeasuredChoice> CalibrateKernelsAmong(absl::Span<const WeightView> weights,
                                                  const CalibrationOptions& options,
                                                  absl::Span<const KernelTable* const> candidates);

// Installs `table` for (t, rows); null removes the choice (tests).
void InstallKernelChoice(WeightType t, CallRows rows, const KernelTable* table);

// The rule: per candidate level, its samples' median; the lowest wins unless `incumbent`'s
// median is within `margin` of it (then the incumbent stays). Samples must not be empty.
std::string ChooseByMedian(const std::vector<std::pair<std::string, std::vector<double>>>& samples,
                           const std::string& incumbent, double margin);

// The cache file: a header line, then "key<TAB>level" lines. Parse ignores a file with
// another header and any malformed line; Format writes what Parse reads.
std::vector<std::pair<std::string, std::string>> ParseKernelCache(const std::string& text);
std::string FormatKernelCache(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace internal
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KERNEL_CALIBRATION_H_
