#include "tests/bench/bandwidth.h"

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_util.h"

#if defined(__AVX512F__)
// GCC 12 warns about its own _mm512_reduce_add_ps (see engine/ops/simd.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace textgen::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kFloatsPerStep = 128;  // 8 zmm loads of 16 floats: 512 bytes

// Sum of `n` floats (n a multiple of kFloatsPerStep, `p` 64-byte aligned). Eight independent
// accumulators keep the adds off the critical path, so the loop runs at load throughput.
float Sum(const float* p, int64_t n) {
#if defined(__AVX512F__)
  __m512 acc[8];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += kFloatsPerStep) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(p + i + 16 * k));
    }
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
#else
  // Builds without AVX-512 in the baseline (the default x86-64-v3): whatever the compiler
  // vectorizes (AVX2 loads).
  float acc[kFloatsPerStep] = {};
  for (int64_t i = 0; i < n; i += kFloatsPerStep) {
    for (int k = 0; k < kFloatsPerStep; ++k) acc[k] += p[i + k];
  }
  float sum = 0;
  for (float a : acc) sum += a;
  return sum;
#endif
}

// Anonymous mapping, asked to be backed by huge pages so that TLB misses do not understate
// the bandwidth; unmapped on destruction.
class Buffer {
 public:
  explicit Buffer(int64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) Die("bandwidth: cannot map " + std::to_string(bytes_) + " bytes");
    madvise(p, bytes_, MADV_HUGEPAGE);  // advice only; fine if refused
    data_ = static_cast<float*>(p);
  }
  ~Buffer() { munmap(data_, bytes_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() const { return data_; }

 private:
  int64_t bytes_;
  float* data_;
};

// Best pass, in seconds, of `threads` threads each summing `per_thread` floats of `data`.
double TimeSums(const float* data, int64_t per_thread, int threads, int passes) {
  std::vector<float> sums(threads);
  std::vector<Clock::time_point> starts(threads), ends(threads);
  std::barrier sync(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int pass = 0; pass < passes; ++pass) {
        sync.arrive_and_wait();  // start together
        starts[t] = Clock::now();
        sums[t] = Sum(data + t * per_thread, per_thread);
        ends[t] = Clock::now();
        sync.arrive_and_wait();  // the main thread reads the times
      }
    });
  }
  double best_s = 1e30;
  for (int pass = 0; pass < passes; ++pass) {
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    best_s = std::min(best_s,
                      std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) -
                                                    *std::min_element(starts.begin(), starts.end()))
                          .count());
    for (int t = 0; t < threads; ++t) {
      // 128 lanes each count per_thread / 128 ones, exactly while that is at most 2^24; adding
      // the lanes rounds a little at most.
      const double expected = static_cast<double>(per_thread);
      if (per_thread / 128 <= (int64_t{1} << 24) &&
          std::abs(sums[t] - expected) > 1e-5 * expected) {
        Die("bandwidth: thread " + std::to_string(t) + " summed " + std::to_string(sums[t]) +
            ", expected " + std::to_string(per_thread));
      }
    }
  }
  for (std::thread& t : pool) t.join();
  return best_s;
}

}  // namespace

std::vector<double> MeasureReadBandwidth(const BandwidthOptions& options,
                                         const std::vector<int>& thread_counts) {
  const int64_t n = options.bytes / static_cast<int64_t>(sizeof(float));
  Buffer buffer(n * static_cast<int64_t>(sizeof(float)));
  float* data = buffer.data();
  {
    // Touched in parallel: faulting in 2 GiB of pages takes a while on one thread.
    const int touchers = std::max(1, *std::max_element(thread_counts.begin(), thread_counts.end()));
    std::vector<std::thread> pool;
    for (int t = 0; t < touchers; ++t) {
      pool.emplace_back(
          [=] { std::fill(data + n * t / touchers, data + n * (t + 1) / touchers, 1.0f); });
    }
    for (std::thread& t : pool) t.join();
  }
  std::vector<double> gbs;
  for (int threads : thread_counts) {
    threads = std::max(1, threads);
    // Each thread's share is a whole number of steps.
    const int64_t per_thread = n / threads / kFloatsPerStep * kFloatsPerStep;
    if (per_thread == 0)
      Die("bandwidth: buffer too small for " + std::to_string(threads) + " threads");
    const double seconds = TimeSums(data, per_thread, threads, options.passes);
    gbs.push_back(static_cast<double>(per_thread) * threads * sizeof(float) / seconds / 1e9);
  }
  return gbs;
}

}  // namespace textgen::bench
