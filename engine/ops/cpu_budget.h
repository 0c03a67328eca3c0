// How many CPUs this process may use: its CPU affinity mask and its cgroup's CPU quota (a
// Kubernetes pod with limits.cpu: 2 on a 64-core node sees 64 online CPUs but gets two CPUs'
// worth of time; 64 compute threads would spend most of it waiting for each other).
#ifndef TEXTGEN_ENGINE_OPS_CPU_BUDGET_H_
#define TEXTGEN_ENGINE_OPS_CPU_BUDGET_H_

#include <optional>
#include <string>
#include <string_view>

namespace textgen::ops {

struct CpuBudget {
  int online = 1;               // CPUs online (std::thread::hardware_concurrency)
  int affinity = 0;             // CPUs in the affinity mask (0: unknown)
  std::optional<double> quota;  // cgroup CPU limit in CPUs (quota / period), if any
  int threads = 1;              // min(affinity or online, ceil(quota)), at least 1
};

// The tightest CPU limit of the cgroup hierarchy `proc_self_cgroup` (the text of
// /proc/self/cgroup) names, read under `cgroup_root` (/sys/fs/cgroup): cgroup v2 cpu.max
// ("max 100000" or "<quota> <period>") or v1 cpu.cfs_quota_us / cpu.cfs_period_us (-1: none),
// for the process's cgroup and each ancestor. nullopt when no level sets a limit or nothing is
// readable (unreadable or malformed files count as no limit).
std::optional<double> CgroupCpuLimit(const std::string& cgroup_root,
                                     std::string_view proc_self_cgroup);

// The budget from `online` CPUs, the affinity count and the quota.
CpuBudget MakeCpuBudget(int online, int affinity, std::optional<double> quota);

// This process's budget (read once: affinity mask and /sys/fs/cgroup at the first call).
const CpuBudget& ProcessCpuBudget();

// "2 compute threads (2 CPUs online, 2 in the affinity mask, cgroup quota 2.00 CPUs)".
std::string DescribeCpuBudget(const CpuBudget& b);

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_CPU_BUDGET_H_
