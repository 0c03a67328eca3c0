#include "engine/ops/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace textgen::ops {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ParseInt(absl::string_view text, int64_t* out) {
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), out);
}

// cgroup v2: "max <period>" (no limit) or "<quota> <period>" in microseconds.
std::optional<double> CpuMaxLimit(const std::string& dir) {
  const std::optional<std::string> text = ReadFile(dir + "/cpu.max");
  if (!text) return std::nullopt;
  const std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (f.size() != 2 || f[0] == "max" || !ParseInt(f[0], &quota) || !ParseInt(f[1], &period) ||
      quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(quota) / static_cast<double>(period);
}

// cgroup v1: cpu.cfs_quota_us (-1: no limit) over cpu.cfs_period_us.
std::optional<double> CfsLimit(const std::string& dir) {
  const std::optional<std::string> q = ReadFile(dir + "/cpu.cfs_quota_us");
  const std::optional<std::string> p = ReadFile(dir + "/cpu.cfs_period_us");
  int64_t quota = 0, period = 0;
  if (!q || !p || !ParseInt(*q, &quota) || !ParseInt(*p, &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(quota) / static_cast<double>(period);
}

std::optional<double> Min(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// The limit of `path` (e.g. "/kubepods/pod1/c1") and its ancestors under `base`. Inside a
// container's cgroup namespace the path is "/" and base itself is the container's cgroup.
template <typename Limit>
std::optional<double> HierarchyLimit(const std::string& base, std::string path, Limit limit) {
  std::optional<double> best;
  while (true) {
    best = Min(best, limit(base + (path == "/" ? "" : path)));
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

}  // namespace

std::optional<double> CgroupCpuLimit(const std::string& cgroup_root,
                                     std::string_view proc_self_cgroup) {
  std::optional<double> best;
  const absl::string_view text(proc_self_cgroup.data(), proc_self_cgroup.size());
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // "hierarchy-id:controllers:path"; the path may itself contain ':'.
    const std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2][0] != '/') continue;
    const std::string path(f[2]);
    if (f[0] == "0" && f[1].empty()) {
      best = Min(best, HierarchyLimit(cgroup_root, path, CpuMaxLimit));
      continue;
    }
    const std::vector<absl::string_view> controllers = absl::StrSplit(f[1], ',');
    if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
    // v1 mounts the controller at <root>/<controllers> (e.g. cpu,cpuacct) with a "cpu" link.
    for (const std::string& mount : {cgroup_root + "/" + std::string(f[1]), cgroup_root + "/cpu"}) {
      if (std::optional<double> l = HierarchyLimit(mount, path, CfsLimit)) {
        best = Min(best, l);
        break;
      }
    }
  }
  return best;
}

CpuBudget MakeCpuBudget(int online, int affinity, std::optional<double> quota) {
  CpuBudget b;
  b.online = std::max(1, online);
  b.affinity = std::max(0, affinity);
  b.quota = quota;
  int threads = b.affinity > 0 ? std::min(b.affinity, b.online) : b.online;
  // A quota of 1.5 CPUs still lets two threads run half the time each; 0.5 gives one.
  if (quota) threads = std::min(threads, std::max(1, static_cast<int>(std::ceil(*quota - 1e-9))));
  b.threads = std::max(1, threads);
  return b;
}

const CpuBudget& ProcessCpuBudget() {
  static const CpuBudget budget = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int affinity = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    const std::optional<std::string> cgroup = ReadFile("/proc/self/cgroup");
    const std::optional<double> quota =
        cgroup ? CgroupCpuLimit("/sys/fs/cgroup", *cgroup) : std::nullopt;
    return MakeCpuBudget(static_cast<int>(std::thread::hardware_concurrency()), affinity, quota);
  }();
  return budget;
}

std::string DescribeCpuBudget(const CpuBudget& b) {
  std::string out = absl::StrCat(b.threads, " compute threads (", b.online, " CPUs online");
  if (b.affinity > 0) absl::StrAppend(&out, ", ", b.affinity, " in the affinity mask");
  if (b.quota) {
    absl::StrAppend(&out, absl::StrFormat(", cgroup quota %.2f CPUs", *b.quota));
  } else {
    absl::StrAppend(&out, ", no cgroup CPU quota");
  }
  return out + ")";
}

}  // namespace textgen::ops
