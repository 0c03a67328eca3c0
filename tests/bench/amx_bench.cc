// Benchmark of AmxBf16Matmul (engine/ops/amx_matmul.h) against the kernels Linear uses today for
// BF16 weights under LinearCompute::kBf16: GemvBf16Dot (Linear kernel kGemv) and oneDNN's
// matmul (kOneDnn), on the stories110M shapes, for several row counts n.
//
//   hot:  one matrix called again and again (weights in L2/L3: the compute side);
//   cold: ~400 MB of distinct matrices of the shape called in turn, so that every call streams
//         its weights from DRAM, as in a real decode step.
// Times are the 10th percentile of the per-call times (robust to co-tenants that steal a core
// for a time slice: an OpenMP join then waits for the descheduled thread). The plain 2-thread
// read bandwidth of 400 MB, measured before and after, is the bound for the cold column.
//
// Usage: amx-bench [--n 1,4,8,16,32,128] [--threads 2] [--hot]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/amx_matmul.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/linear.h"
#include "engine/ops/simd.h"
#include "engine/ops/threading.h"

namespace textgen::ops {
namespace {

using Clock = std::chrono::steady_clock;

// Microseconds per call: the 10th percentile over ~seconds of calls cycling through k_count
// matrices (at least 20 calls).
double CallUs(int k_count, const std::function<void(int)>& f, double seconds) {
  for (int k = 0; k < k_count; ++k) f(k);  // warm-up: scratch buffers, OpenMP team
  std::vector<double> t;
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds || t.size() < 20) {
    for (int k = 0; k < k_count; ++k) {
      const auto t0 = Clock::now();
      f(k);
      t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 10] * 1e6;
}

// GB/s of a plain read of 400 MB split across `threads` (simd::Dot of each half with itself).
double ReadGbps(int threads) {
  const int64_t count = int64_t{100} << 20;  // floats
  std::vector<float> big(static_cast<size_t>(count), 1.0f);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    std::vector<float> sums(static_cast<size_t>(threads));
    ParallelFor(count, 1 << 16, threads, [&](int64_t b, int64_t e) {
      sums[static_cast<size_t>(b * threads / count)] = simd::Dot(&big[b], &big[b], e - b);
    });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    if (sums[0] < 0) std::printf("?");  // keeps the reads
  }
  return static_cast<double>(count) * 4 / best * 1e-9;
}

void Run(const std::vector<int64_t>& ns, int threads, bool hot_only) {
  SetNumThreads(threads);
  if (!AmxBf16Matmul::Available()) {
    std::printf("AMX-BF16 not available on this CPU/build\n");
    return;
  }
  std::printf("plain %d-thread read of 400 MB: %.1f GB/s\n", threads, ReadGbps(threads));
  std::printf("per-call us (p10), %d threads; cold GB/s = weight bytes / amx cold time\n", threads);
  std::printf("%-12s %4s | %9s %9s %9s | %9s %9s %9s | %s\n", "(out,in)", "n", "amx hot",
              "gemv hot", "dnnl hot", "amx cold", "gemv cold", "dnnl cold", "amx GB/s");
  struct Shape {
    int64_t out, in;
  };
  for (const Shape s : {Shape{768, 768}, Shape{2048, 768}, Shape{768, 2048}, Shape{32000, 768}}) {
    const int64_t elems = s.out * s.in;
    const size_t bytes = static_cast<size_t>(elems) * 2;
    const int k_count =
        hot_only ? 1 : std::max<int>(1, static_cast<int>((size_t{400} << 20) / bytes));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    std::vector<float> wf(static_cast<size_t>(elems));
    for (float& v : wf) v = dist(rng);
    std::vector<uint16_t> wb(wf.size());
    ToBf16Activations(wf.data(), elems, wb.data());
    const WeightView view{WeightType::kBf16, wb.data(), s.out, s.in};
    std::vector<std::unique_ptr<AmxBf16Matmul>> amx;
    std::vector<std::unique_ptr<Linear>> gemv, dnnl;
    for (int k = 0; k < k_count; ++k) {
      LinearOptions o;
      o.compute = LinearCompute::kBf16;
      o.copy_weights = true;  // distinct copies: each call of the cold set streams its own
      o.kernel = LinearKernel::kGemv;
      auto a = AmxBf16Matmul::Create(view);
      auto g = Linear::Create(view, o);
      o.kernel = LinearKernel::kOneDnn;
      auto d = Linear::Create(view, o);
      if (!a.ok() || !g.ok() || !d.ok()) {
        std::printf("create failed\n");
        return;
      }
      amx.push_back(std::move(*a));
      gemv.push_back(std::move(*g));
      dnnl.push_back(std::move(*d));
    }
    for (int64_t n : ns) {
      std::vector<float> x(static_cast<size_t>(n * s.in)), y(static_cast<size_t>(n * s.out));
      for (float& v : x) v = dist(rng);
      auto fa = [&](int k) { (void)amx[k]->Run(x.data(), n, y.data()); };
      auto fg = [&](int k) { (void)gemv[k]->Forward(x.data(), n, y.data()); };
      auto fd = [&](int k) { (void)dnnl[k]->Forward(x.data(), n, y.data()); };
      const double ah = CallUs(1, fa, 0.05), gh = CallUs(1, fg, 0.05), dh = CallUs(1, fd, 0.05);
      double ac = 0, gc = 0, dc = 0;
      if (!hot_only) {
        ac = CallUs(k_count, fa, 0.15);
        gc = CallUs(k_count, fg, 0.15);
        dc = CallUs(k_count, fd, 0.15);
      }
      std::printf("(%5lld,%4lld) %4lld | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | %5.1f\n",
                  static_cast<long long>(s.out), static_cast<long long>(s.in),
                  static_cast<long long>(n), ah, gh, dh, ac, gc, dc,
                  ac > 0 ? static_cast<double>(bytes) / ac * 1e-3 : 0.0);
      std::fflush(stdout);
    }
  }
  std::printf("plain %d-thread read of 400 MB: %.1f GB/s\n", threads, ReadGbps(threads));
}

}  // namespace
}  // namespace textgen::ops

int main(int argc, char** argv) {
  std::vector<int64_t> ns = {1, 4, 8, 16, 32, 128};
  int threads = 2;
  bool hot_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--hot") == 0) {
      hot_only = true;
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
      ns.clear();
      for (char* p = argv[++i]; *p != '\0';) {
        ns.push_back(std::strtoll(p, &p, 10));
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "usage: amx-bench [--n 1,4,16] [--threads 2] [--hot]\n");
      return 2;
    }
  }
  textgen::ops::Run(ns, threads, hot_only);
  return 0;
}
