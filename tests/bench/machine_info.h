// Facts about the machine and this process that the bench's tables quote: CPU model, peak
// resident memory.
#ifndef TEXTGEN_TESTS_BENCH_MACHINE_INFO_H_
#define TEXTGEN_TESTS_BENCH_MACHINE_INFO_H_

#include <cstdint>
#include <string>

namespace textgen::bench {

// "model name" of the first CPU in /proc/cpuinfo; "unknown CPU" if there is none.
std::string CpuModelName();

// This process's peak resident set (VmHWM of /proc/self/status) in bytes; -1 if unreadable.
int64_t PeakRssBytes();

// Lowers the peak to the current resident set (writes 5 to /proc/self/clear_refs, Linux
// >= 4.0), so that PeakRssBytes() measures what comes next rather than what came before
// (e.g. the bandwidth buffer or an earlier model). False if the kernel refused.
bool ResetPeakRss();

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_MACHINE_INFO_H_
