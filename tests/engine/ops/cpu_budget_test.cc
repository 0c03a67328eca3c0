// The CPU budget: cgroup v1/v2 quota parsing from fake cgroup trees, and the thread count.
#include "engine/ops/cpu_budget.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/test_util.h"

namespace textgen::ops {
namespace cpu_budget_test {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  textgen::testing::WriteFile(path.string(), text);
}

TEST_CASE("cgroup v2: cpu.max of the process's cgroup and its ancestors", "[cpu_budget]") {
  const fs::path root = fs::path(textgen::testing::ScratchDir());
  const std::string self = "0::/kubepods/pod1/c1\n";
  SECTION("no files: no limit") { CHECK_FALSE(CgroupCpuLimit(root.string(), self).has_value()); }
  SECTION("max: no limit") {
    Write(root / "kubepods/pod1/c1/cpu.max", "max 100000\n");
    CHECK_FALSE(CgroupCpuLimit(root.string(), self).has_value());
  }
  SECTION("the container's quota") {
    Write(root / "kubepods/pod1/c1/cpu.max", "200000 100000\n");
    CHECK(CgroupCpuLimit(root.string(), self) == 2.0);
  }
  SECTION("a tighter ancestor wins") {
    Write(root / "kubepods/pod1/c1/cpu.max", "400000 100000\n");
    Write(root / "kubepods/pod1/cpu.max", "150000 100000\n");
    CHECK(CgroupCpuLimit(root.string(), self) == 1.5);
  }
  SECTION("inside a cgroup namespace the path is / and the root holds the limit") {
    Write(root / "cpu.max", "50000 100000\n");
    CHECK(CgroupCpuLimit(root.string(), "0::/\n") == 0.5);
  }
  SECTION("malformed files count as no limit") {
    Write(root / "kubepods/pod1/c1/cpu.max", "lots\n");
    Write(root / "kubepods/pod1/cpu.max", "100000 0\n");
    CHECK_FALSE(CgroupCpuLimit(root.string(), self).has_value());
  }
}

// cgroup v1's pair of files in `dir`.
void WriteCfs(const fs::path& dir, const std::string& quota, const std::string& period) {
  Write(dir / "cpu.cfs_quota_us", quota + "\n");
  Write(dir / "cpu.cfs_period_us", period + "\n");
}

TEST_CASE("cgroup v1: cfs quota and period under the cpu controller", "[cpu_budget]") {
  const fs::path root = fs::path(textgen::testing::ScratchDir());
  const std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/x\n";
  SECTION("-1: no limit") {
    WriteCfs(root / "cpu,cpuacct/docker/abc", "-1", "100000");
    CHECK_FALSE(CgroupCpuLimit(root.string(), self).has_value());
  }
  SECTION("a quota of three CPUs") {
    WriteCfs(root / "cpu,cpuacct/docker/abc", "300000", "100000");
    CHECK(CgroupCpuLimit(root.string(), self) == 3.0);
  }
  SECTION("the controller reached through the cpu link") {
    WriteCfs(root / "cpu/docker", "100000", "50000");
    CHECK(CgroupCpuLimit(root.string(), self) == 2.0);
  }
  SECTION("lines of other controllers and garbage are ignored") {
    WriteCfs(root / "memory/docker/abc", "100000", "100000");
    CHECK_FALSE(CgroupCpuLimit(root.string(), "12:memory:/docker/abc\nnonsense\n").has_value());
  }
}

TEST_CASE("threads: the affinity mask, capped by the rounded-up quota", "[cpu_budget]") {
  CHECK(MakeCpuBudget(64, 64, 2.0).threads == 2);  // limits.cpu: 2 on a 64-core node
  CHECK(MakeCpuBudget(64, 64, 1.5).threads == 2);
  CHECK(MakeCpuBudget(64, 64, 0.25).threads == 1);
  CHECK(MakeCpuBudget(64, 8, std::nullopt).threads == 8);  // taskset -c 0-7
  CHECK(MakeCpuBudget(64, 8, 16.0).threads == 8);
  CHECK(MakeCpuBudget(4, 0, std::nullopt).threads == 4);  // affinity unknown: online CPUs
  CHECK(DescribeCpuBudget(MakeCpuBudget(64, 64, 2.0)) ==
        "2 compute threads (64 CPUs online, 64 in the affinity mask, cgroup quota 2.00 CPUs)");
}

TEST_CASE("this process's budget is within its online CPUs", "[cpu_budget]") {
  const CpuBudget& b = ProcessCpuBudget();
  CHECK(b.threads >= 1);
  CHECK(b.threads <= b.online);
  if (b.affinity > 0) CHECK(b.threads <= b.affinity);
}

}  // namespace cpu_budget_test
}  // namespace textgen::ops
