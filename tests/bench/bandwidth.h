// The machine's memory read bandwidth, the ceiling of a memory-bound decode step: a decode
// step streams every weight once, so weight bytes x tokens/s over this figure says how close
// the engine gets to the hardware.
#ifndef TEXTGEN_TESTS_BENCH_BANDWIDTH_H_
#define TEXTGEN_TESTS_BENCH_BANDWIDTH_H_

#include <cstdint>
#include <vector>

namespace textgen::bench {

struct BandwidthOptions {
  // Larger than the last-level cache (this VM reports 480 MiB of L3), so the sums read DRAM.
  int64_t bytes = int64_t{2} << 30;
  int passes = 5;  // best of
};

// Allocates the buffer and touches every page (writing ones, so the sums check the loads),
// then for each entry of `thread_counts` sums it with AVX-512 loads on that many std::threads,
// each over its own contiguous share. Returns, per entry, the best pass in GB/s (1e9 bytes/s),
// a pass lasting from the first thread's start to the last one's end. Exits the process if a
// sum comes out wrong.
std::vector<double> MeasureReadBandwidth(const BandwidthOptions& options,
                                         const std::vector<int>& thread_counts);

}  // namespace textgen::bench

#endif  // TEXTGEN_TESTS_BENCH_BANDWIDTH_H_
