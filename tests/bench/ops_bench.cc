// Micro-benchmark of engine/ops: per-call time of Linear for the shapes of the target models
// with each kernel and thread count, plus the element-wise ops and paged attention, an
// estimate of stories260K's per-token op time, and the bandwidth of the decode weight kernels
// (Q8_0/F16/BF16/F32 row-range GEMV), weight conversions and the Q4_K/Q6_K int8 GEMV.
//
// Usage: ops-bench [--quick] [--weights | --attention | --kquant | --invariance | --f32]   (only
// the decode weight kernels / only the decode-step attention over an F32 and a BF16 KV cache /
// only Q4_K, Q6_K / only Linear with batch_invariant on and off / only the F32 norm, activation,
// softmax and attention kernels)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "engine/kv_cache/kv_cache.h"
#include "engine/ops/attention.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/gemv_float.h"
#include "engine/ops/half.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/linear.h"
#include "engine/ops/q8_0_gemv.h"
#include "engine/ops/rope.h"
#include "engine/ops/simd.h"
#include "engine/ops/softmax.h"
#include "engine/ops/threading.h"
#include "engine/ops/weight.h"
#include "engine/ops/weight_convert.h"

namespace textgen::ops {
namespace {

bool g_quick = false;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Microseconds per call: the best of several timed batches (robust to noisy neighbours),
// each batch long enough (~20 ms) for the clock to be negligible.
double TimeUs(const std::function<void()>& f) {
  using Clock = std::chrono::steady_clock;
  f();  // warm-up: caches, thread-local scratch, OpenMP team
  auto t0 = Clock::now();
  f();
  const double one = std::chrono::duration<double>(Clock::now() - t0).count();
  const double batch_s = g_quick ? 0.005 : 0.02;
  const int64_t iters = std::max<int64_t>(1, static_cast<int64_t>(batch_s / std::max(one, 1e-9)));
  double best = 1e30;
  for (int rep = 0; rep < (g_quick ? 2 : 5); ++rep) {
    t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  return best * 1e6;
}

void BenchLinear() {
  struct Shape {
    int64_t out, in;
  };
  const Shape shapes[] = {{64, 64},    {172, 64},  {64, 172},   {512, 64},
                          {2048, 768}, {768, 768}, {32000, 768}};
  std::printf("Linear per-call time, microseconds (auto = kernel kAuto picks)\n");
  std::printf("%-12s %4s %3s | %9s %9s %9s %9s | %s\n", "(out,in)", "M", "thr", "auto", "onednn",
              "gemv", "onednn16", "auto kernel");
  for (const Shape& s : shapes) {
    const std::vector<float> w = Random(s.out * s.in, 1);
    LinearOptions o;
    auto lin_auto = Linear::Create(w.data(), s.out, s.in, o);
    o.kernel = LinearKernel::kOneDnn;
    auto lin_dnnl = Linear::Create(w.data(), s.out, s.in, o);
    o.kernel = LinearKernel::kGemv;
    auto lin_direct = Linear::Create(w.data(), s.out, s.in, o);
    o.kernel = LinearKernel::kOneDnn;
    o.compute = LinearCompute::kBf16;
    auto lin_bf16 = Linear::Create(w.data(), s.out, s.in, o);
    if (!lin_auto.ok() || !lin_dnnl.ok() || !lin_direct.ok() || !lin_bf16.ok()) {
      std::printf("create failed\n");
      return;
    }
    for (int64_t m : {1, 4, 128}) {
      const std::vector<float> x = Random(m * s.in, 2);
      std::vector<float> y(m * s.out);
      for (int threads : {1, 2}) {
        SetNumThreads(threads);
        auto run = [&](const Linear& l) {
          return TimeUs([&] { (void)l.Forward(x.data(), m, y.data()); });
        };
        std::printf("(%5lld,%4lld) %4lld %3d | %9.2f %9.2f %9.2f %9.2f | %s\n",
                    static_cast<long long>(s.out), static_cast<long long>(s.in),
                    static_cast<long long>(m), threads, run(**lin_auto), run(**lin_dnnl),
                    run(**lin_direct), run(**lin_bf16), (*lin_auto)->KernelName(m).c_str());
      }
    }
  }
}

// Linear with batch_invariant on (the GEMV kernels for every row count, cache-blocked) and off
// (oneDNN above gemv_max_rows), both compute modes, stories110M's matrix shapes: per-call time
// on one thread (threads split the output rows the same way in both modes).
void BenchInvariance() {
  std::printf("Linear, batch_invariant on vs off, 1 thread: us per call (best of many)\n");
  std::printf("%-6s %-4s %-12s %4s | %10s %10s %7s | %s\n", "type", "mode", "(out,in)", "M", "on",
              "off", "on/off", "off kernel");
  SetNumThreads(1);
  struct Shape {
    int64_t out, in;
  };
  std::mt19937 rng(5);
  for (const auto& [type, compute] : {std::pair{WeightType::kF32, LinearCompute::kF32},
                                      {WeightType::kF32, LinearCompute::kBf16},
                                      {WeightType::kQ8_0, LinearCompute::kBf16},
                                      {WeightType::kQ4_K, LinearCompute::kBf16}}) {
    for (const Shape s : {Shape{768, 768}, Shape{2048, 768}, Shape{768, 2048}}) {
      const std::vector<float> wf = Random(s.out * s.in, 1);
      std::vector<uint8_t> wq(WeightView{type, nullptr, s.out, s.in}.bytes());
      for (uint8_t& b : wq) b = static_cast<uint8_t>(rng() & 0x3f);  // small F16 scales
      const void* data = type == WeightType::kF32 ? static_cast<const void*>(wf.data()) : wq.data();
      LinearOptions o;
      o.compute = compute;
      auto on = Linear::Create(WeightView{type, data, s.out, s.in}, o);
      o.batch_invariant = false;
      auto off = Linear::Create(WeightView{type, data, s.out, s.in}, o);
      if (!on.ok() || !off.ok()) {
        std::printf("create failed\n");
        return;
      }
      for (int64_t m : {1, 4, 16, 64, 128}) {
        const std::vector<float> x = Random(m * s.in, 2);
        std::vector<float> y(m * s.out);
        // The fastest of many single calls, alternating on and off: on a shared machine the
        // calls that ran without being descheduled.
        double t_on = 1e30, t_off = 1e30;
        for (int rep = 0; rep < (g_quick ? 10 : 60); ++rep) {
          for (bool inv : {true, false}) {
            const auto t0 = std::chrono::steady_clock::now();
            (void)(inv ? **on : **off).Forward(x.data(), m, y.data());
            const double us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
            (inv ? t_on : t_off) = std::min(inv ? t_on : t_off, us);
          }
        }
        std::printf("%-6s %-4s (%5lld,%4lld) %4lld | %10.1f %10.1f %7.2f | %s\n",
                    std::string(WeightTypeName(type)).c_str(),
                    compute == LinearCompute::kF32 ? "f32" : "bf16", static_cast<long long>(s.out),
                    static_cast<long long>(s.in), static_cast<long long>(m), t_on, t_off,
                    t_on / t_off, (*off)->KernelName(m).c_str());
      }
    }
  }
}

// Weight bytes per second of the decode-path kernels on one thread (the calling one), for
// matrices bigger than L2 so that the weights stream from L3/DRAM as in a real decode step.
// GB/s = w.bytes() / time per call; activations and outputs are not counted.
void BenchWeightKernels() {
  std::printf("\nDecode weight kernels, one thread, GB/s of weight bytes (time per call in us)\n");
  {
    // The ceiling: a plain streaming read (AVX-512 dot product of a 256 MB array with itself).
    std::vector<float> big = Random(64 << 20, 20);
    volatile float sink = 0;
    const double us = TimeUs([&] { sink = simd::Dot(big.data(), big.data(), big.size()); });
    (void)sink;
    std::printf("  streaming read of 256 MB: %.1f GB/s\n", big.size() * 4 / us * 1e-3);
  }
  struct Shape {
    int64_t out, in;
  };
  for (const Shape s : {Shape{32000, 768}, Shape{5632, 2048}}) {
    const int64_t elems = s.out * s.in, nb = elems / kQ8_0Block;
    // Q8_0 with random int8 and scales ~ 1/127 (as quantized weights of magnitude ~1 have).
    std::vector<BlockQ8_0> q8(nb);
    std::mt19937 rng(21);
    for (BlockQ8_0& b : q8) {
      b.d = half::F32ToF16(std::uniform_real_distribution<float>(0.001f, 0.02f)(rng));
      for (int8_t& q : b.qs) q = static_cast<int8_t>(rng());
    }
    const std::vector<float> wf = Random(elems, 22);
    std::vector<uint16_t> wh(elems), wb(elems);
    for (int64_t k = 0; k < elems; ++k) {
      wh[k] = half::F32ToF16(wf[k]);
      wb[k] = half::F32ToBf16(wf[k]);
    }
    const WeightView vq{WeightType::kQ8_0, q8.data(), s.out, s.in};
    const WeightView vh{WeightType::kF16, wh.data(), s.out, s.in};
    const WeightView vb{WeightType::kBf16, wb.data(), s.out, s.in};
    const WeightView vf{WeightType::kF32, wf.data(), s.out, s.in};
    std::printf("  (%lld x %lld): Q8_0 %.1f MB, F16/BF16 %.1f MB, F32 %.1f MB\n",
                static_cast<long long>(s.out), static_cast<long long>(s.in), vq.bytes() / 1e6,
                vh.bytes() / 1e6, vf.bytes() / 1e6);
    std::printf("  %3s | %18s %18s %18s %18s %18s\n", "n", "q8_0 exact", "q8_0 vnni", "f16", "bf16",
                "f32");
    for (int64_t n : {1, 4, 8}) {
      const std::vector<float> x = Random(n * s.in, 23);
      std::vector<BlockQ8_0> xq(n * s.in / kQ8_0Block);
      std::vector<float> y(n * s.out);
      auto cell = [&](const WeightView& v, const std::function<void()>& f) {
        const double us = TimeUs(f);
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%6.1f (%8.1f)", v.bytes() / us * 1e-3, us);
        return std::string(buf);
      };
      const std::string exact =
          cell(vq, [&] { GemvQ8_0Exact(vq, x.data(), n, y.data(), s.out, 0, s.out); });
      // Includes quantizing the activations, as a decode step must.
      const std::string vnni = cell(vq, [&] {
        QuantizeActivationsQ8_0(x.data(), n, s.in, xq.data());
        GemvQ8_0Vnni(vq, xq.data(), n, y.data(), s.out, 0, s.out);
      });
      const std::string f16 =
          cell(vh, [&] { GemvF16(vh, x.data(), n, y.data(), s.out, 0, s.out); });
      const std::string bf16 =
          cell(vb, [&] { GemvBf16(vb, x.data(), n, y.data(), s.out, 0, s.out); });
      const std::string f32 =
          cell(vf, [&] { GemvF32(vf, x.data(), n, y.data(), s.out, 0, s.out); });
      std::printf("  %3lld | %18s %18s %18s %18s %18s\n", static_cast<long long>(n), exact.c_str(),
                  vnni.c_str(), f16.c_str(), bf16.c_str(), f32.c_str());
    }
    // Conversion of the whole matrix (e.g. for a prefill GEMM): GB/s of source bytes.
    std::vector<float> dst_f(elems);
    std::vector<uint16_t> dst_b(elems);
    std::printf("  convert -> F32 / BF16, GB/s of source: q8_0 %.1f / %.1f, f16 %.1f / %.1f\n",
                vq.bytes() / TimeUs([&] { ConvertRowsF32(vq, 0, s.out, dst_f.data()); }) * 1e-3,
                vq.bytes() / TimeUs([&] { ConvertRowsBf16(vq, 0, s.out, dst_b.data()); }) * 1e-3,
                vh.bytes() / TimeUs([&] { ConvertRowsF32(vh, 0, s.out, dst_f.data()); }) * 1e-3,
                vh.bytes() / TimeUs([&] { ConvertRowsBf16(vh, 0, s.out, dst_b.data()); }) * 1e-3);
  }
}

// Q4_K / Q6_K fast-mode GEMV (activation quantization included), one thread: a matrix larger
// than L3 (DRAM), stories110M's output layer and one that stays in L2 (the kernel's compute
// ceiling).
void BenchKQuant() {
  std::printf("\nQ4_K / Q6_K int8 GEMV, one thread, GB/s of weight bytes (time per call in us)\n");
  struct Shape {
    int64_t out, in;
  };
  for (const Shape s : {Shape{32000, 4096}, Shape{32000, 768}, Shape{256, 2048}}) {
    std::printf("  (%lld x %lld)\n  %3s | %18s %18s\n", static_cast<long long>(s.out),
                static_cast<long long>(s.in), "n", "q4_k", "q6_k");
    std::mt19937 rng(31);
    std::vector<BlockQ4_K> q4(s.out * s.in / kQkK);
    std::vector<BlockQ6_K> q6(s.out * s.in / kQkK);
    for (BlockQ4_K& b : q4) {
      for (uint8_t& v : b.scales) v = static_cast<uint8_t>(rng());
      for (uint8_t& v : b.qs) v = static_cast<uint8_t>(rng());
      b.d = half::F32ToF16(0.001f);
      b.dmin = half::F32ToF16(0.002f);
    }
    for (BlockQ6_K& b : q6) {
      for (uint8_t& v : b.ql) v = static_cast<uint8_t>(rng());
      for (uint8_t& v : b.qh) v = static_cast<uint8_t>(rng());
      for (int8_t& v : b.scales) v = static_cast<int8_t>(rng());
      b.d = half::F32ToF16(0.001f);
    }
    const WeightView v4{WeightType::kQ4_K, q4.data(), s.out, s.in};
    const WeightView v6{WeightType::kQ6_K, q6.data(), s.out, s.in};
    for (int64_t n : {1, 2, 4, 8}) {
      const std::vector<float> x = Random(n * s.in, 23);
      std::vector<BlockQ8_K> xq(n * s.in / kQkK);
      std::vector<float> y(n * s.out);
      auto cell = [&](const WeightView& v) {
        // The fastest of many single calls: on a shared machine the calls that ran alone.
        double us = 1e30;
        for (int rep = 0; rep < (g_quick ? 20 : 100); ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          QuantizeActivationsQ8_K(x.data(), n, s.in, xq.data());
          GemvKQuantInt8(v, xq.data(), n, y.data(), s.out, 0, s.out);
          us = std::min(
              us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                      .count());
        }
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%6.1f (%8.1f)", v.bytes() / us * 1e-3, us);
        return std::string(buf);
      };
      const std::string a = cell(v4), b = cell(v6);
      std::printf("  %3lld | %18s %18s\n", static_cast<long long>(n), a.c_str(), b.c_str());
    }
  }
}

void BenchElementwise() {
  std::printf("\nElement-wise ops, microseconds per call (1 row)\n");
  for (int64_t d : {64, 4096}) {
    std::vector<float> x = Random(d, 3), w = Random(d, 4), out(d);
    std::printf("  RmsNorm d=%-6lld %8.3f\n", static_cast<long long>(d),
                TimeUs([&] { RmsNorm(x.data(), 1, d, w.data(), 1e-5f, out.data()); }));
  }
  for (int64_t f : {172, 11008}) {
    std::vector<float> g = Random(f, 5), u = Random(f, 6);
    std::printf("  SiluMul f=%-6lld %8.3f\n", static_cast<long long>(f), TimeUs([&] {
                  std::vector<float> gg = g;
                  SiluMul(gg.data(), u.data(), f);
                }));
  }
  for (int64_t v : {512, 32000}) {
    std::vector<float> l = Random(v, 7);
    std::vector<double> lp(v);
    std::printf("  LogSoftmax v=%-6lld %8.3f   ArgMax %8.3f\n", static_cast<long long>(v),
                TimeUs([&] { LogSoftmax(l.data(), v, lp.data()); }),
                TimeUs([&] { (void)ArgMax(l.data(), v); }));
  }
  RopeConfig rc{.n_heads = 32, .head_dim = 128, .rope_dim = 128};
  std::vector<float> q = Random(32 * 128, 8);
  const int32_t pos = 1234;
  std::printf("  Rope 32x128 (1 token) %8.3f\n", TimeUs([&] { Rope(rc, &pos, 1, q.data()); }));
}

// The F32 kernels issue #32 gives one order at every level, one thread: RmsNorm, SiluMul,
// Softmax and LogSoftmax at real sizes, and one decode step's attention (one token, every
// head) at contexts 512 and 2048 over F32 and BF16 tiles, for Llama-7B-like (32/32 heads x
// 128) and TinyLlama-like (32/4 x 64) shapes.
void BenchF32Kernels() {
  std::printf("\nF32 kernels, microseconds per call (1 row, 1 thread)\n");
  for (int64_t d : {2048, 4096}) {
    std::vector<float> x = Random(d, 3), w = Random(d, 4), out(d);
    std::printf("  RmsNorm d=%-6lld %9.3f\n", static_cast<long long>(d),
                TimeUs([&] { RmsNorm(x.data(), 1, d, w.data(), 1e-5f, out.data()); }));
  }
  for (int64_t f : {5632, 11008}) {
    std::vector<float> g = Random(f, 5), u = Random(f, 6), gg(f);
    std::printf("  SiluMul f=%-6lld %9.3f\n", static_cast<long long>(f), TimeUs([&] {
                  std::copy(g.begin(), g.end(), gg.begin());
                  SiluMul(gg.data(), u.data(), f);
                }));
  }
  for (int64_t v : {2048, 32000}) {
    std::vector<float> l = Random(v, 7), t(v);
    std::vector<double> lp(v);
    std::printf("  Softmax v=%-6lld %9.3f   LogSoftmax %9.3f\n", static_cast<long long>(v),
                TimeUs([&] {
                  std::copy(l.begin(), l.end(), t.begin());
                  Softmax(t.data(), v);
                }),
                TimeUs([&] { LogSoftmax(l.data(), v, lp.data()); }));
  }
  std::printf("  attention, one decode token (all heads), microseconds:\n");
  for (const AttentionShape& s :
       {AttentionShape{.n_heads = 32, .n_kv_heads = 32, .head_dim = 128, .block_size = 16},
        AttentionShape{.n_heads = 32, .n_kv_heads = 4, .head_dim = 64, .block_size = 16}}) {
    for (int64_t n_ctx : {512, 2048}) {
      const int64_t nb = (n_ctx + s.block_size - 1) / s.block_size;
      const int64_t per = s.n_kv_heads * s.block_size * s.head_dim;
      std::vector<float> k = Random(nb * per, 9), v = Random(nb * per, 10);
      std::vector<uint16_t> k16(k.size()), v16(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k16[i] = half::F32ToBf16(k[i]);
        v16[i] = half::F32ToBf16(v[i]);
      }
      std::vector<const float*> kb, vb;
      std::vector<const uint16_t*> kb16, vb16;
      for (int64_t b = 0; b < nb; ++b) {
        kb.push_back(k.data() + b * per);
        vb.push_back(v.data() + b * per);
        kb16.push_back(k16.data() + b * per);
        vb16.push_back(v16.data() + b * per);
      }
      std::vector<float> q = Random(s.n_heads * s.head_dim, 11), out(q.size());
      std::printf(
          "    heads %2lld/%2lld hd %3lld n_ctx %5lld: f32 %9.2f  bf16 %9.2f\n",
          static_cast<long long>(s.n_heads), static_cast<long long>(s.n_kv_heads),
          static_cast<long long>(s.head_dim), static_cast<long long>(n_ctx),
          TimeUs([&] { (void)PagedAttention(s, q.data(), kb, vb, n_ctx, out.data()); }),
          TimeUs([&] { (void)PagedAttention(s, q.data(), kb16, vb16, n_ctx, out.data()); }));
    }
  }
}

void BenchAttention() {
  std::printf("\nPagedAttention, microseconds per (token, layer)\n");
  struct Case {
    AttentionShape s;
    int64_t n_ctx;
  };
  const Case cases[] = {
      {{.n_heads = 8, .n_kv_heads = 4, .head_dim = 8, .block_size = 16}, 256},
      {{.n_heads = 8, .n_kv_heads = 4, .head_dim = 8, .block_size = 16}, 512},
      {{.n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .block_size = 16}, 1024},
      {{.n_heads = 32, .n_kv_heads = 32, .head_dim = 128, .block_size = 16}, 4096},
  };
  for (const Case& c : cases) {
    const int64_t nb = (c.n_ctx + c.s.block_size - 1) / c.s.block_size;
    const int64_t per = c.s.n_kv_heads * c.s.block_size * c.s.head_dim;
    std::vector<float> k = Random(nb * per, 9), v = Random(nb * per, 10);
    std::vector<const float*> kb, vb;
    for (int64_t b = 0; b < nb; ++b) {
      kb.push_back(k.data() + b * per);
      vb.push_back(v.data() + b * per);
    }
    std::vector<float> q = Random(c.s.n_heads * c.s.head_dim, 11), out(q.size());
    std::printf("  heads %2lld/%2lld hd %3lld bs %2lld n_ctx %5lld: %9.2f\n",
                static_cast<long long>(c.s.n_heads), static_cast<long long>(c.s.n_kv_heads),
                static_cast<long long>(c.s.head_dim), static_cast<long long>(c.s.block_size),
                static_cast<long long>(c.n_ctx),
                TimeUs([&] { (void)PagedAttention(c.s, q.data(), kb, vb, c.n_ctx, out.data()); }));
  }
}

// The attention of one decode step of a batch on a real paged KV cache: `seqs` sequences of
// `n_ctx` tokens, stories110M's shape (12 layers, 12 heads, head_dim 64), blocks interleaved
// between the sequences as continuous batching leaves them. Every (sequence, layer) is one
// PagedAttention call, split over `threads` as LlamaModel::Attention does; the K/V read per
// step (~2 x 12 x 12 x 64 x n_ctx x seqs elements) is far beyond the caches.
void BenchDecodeAttention() {
  const int layers = 12, heads = 12, hd = 64, bs = 16, seqs = 16, n_ctx = 200;
  const AttentionShape shape{
      .n_heads = heads, .n_kv_heads = heads, .head_dim = hd, .block_size = bs};
  std::printf(
      "\nDecode-step attention, %d sequences x %d tokens, %d layers x %d heads x %d dims"
      " (stories110M), ms per step\n",
      seqs, n_ctx, layers, heads, hd);
  for (KvType type : {KvType::kF32, KvType::kBf16}) {
    const int blocks_per_seq = (n_ctx + bs - 1) / bs;
    auto cache = KvCache::Create({.n_layers = layers,
                                  .n_kv_heads = heads,
                                  .head_dim = hd,
                                  .block_size = bs,
                                  .num_blocks = seqs * blocks_per_seq,
                                  .type = type});
    if (!cache.ok()) {
      std::printf("  %s\n", std::string(cache.status().message()).c_str());
      return;
    }
    KvCache& kc = **cache;
    BlockPool& pool = kc.pool();
    std::vector<BlockTable> tables(seqs);
    // One block per sequence at a time: the sequences' blocks interleave in the pool.
    for (int t = 0; t < n_ctx; t += bs) {
      for (BlockTable& table : tables) (void)kc.Append(table, std::min(bs, n_ctx - t));
    }
    // Write every element (random values in [-1, 1)), so every page is resident.
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t tile = int64_t{bs} * hd;
    for (int32_t b = 0; b < pool.num_total(); ++b) {
      for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
          for (int64_t i = 0; i < tile; ++i) {
            if (type == KvType::kF32) {
              pool.Key(b, l, h)[i] = dist(rng);
              pool.Value(b, l, h)[i] = dist(rng);
            } else {
              pool.KeyBf16(b, l, h)[i] = half::F32ToBf16(dist(rng));
              pool.ValueBf16(b, l, h)[i] = half::F32ToBf16(dist(rng));
            }
          }
        }
      }
    }
    // [layers][seqs] block pointer lists, as the model builds them per layer.
    std::vector<std::vector<const float*>> k32(layers * seqs), v32(layers * seqs);
    std::vector<std::vector<const uint16_t*>> k16(layers * seqs), v16(layers * seqs);
    for (int l = 0; l < layers; ++l) {
      for (int s = 0; s < seqs; ++s) {
        for (int32_t b : tables[s].blocks) {
          if (type == KvType::kF32) {
            k32[l * seqs + s].push_back(pool.Key(b, l, 0));
            v32[l * seqs + s].push_back(pool.Value(b, l, 0));
          } else {
            k16[l * seqs + s].push_back(pool.KeyBf16(b, l, 0));
            v16[l * seqs + s].push_back(pool.ValueBf16(b, l, 0));
          }
        }
      }
    }
    const std::vector<float> q = Random(int64_t{seqs} * heads * hd, 2);
    std::vector<float> out(q.size());
    const double mb =
        static_cast<double>(seqs) * n_ctx * layers * 2 * heads * hd * KvTypeBytes(type) / 1e6;
    for (int threads : {1, 2}) {
      const double us = TimeUs([&] {
        for (int l = 0; l < layers; ++l) {
          ParallelForEach(seqs, threads, [&](int64_t s) {
            const size_t i = l * seqs + s;
            const float* qs = q.data() + s * heads * hd;
            float* os = out.data() + s * heads * hd;
            (void)(type == KvType::kF32 ? PagedAttention(shape, qs, k32[i], v32[i], n_ctx, os)
                                        : PagedAttention(shape, qs, k16[i], v16[i], n_ctx, os));
          });
        }
      });
      std::printf("  %-4s K/V, %d thread%s: %7.2f ms  (%.0f MB of K/V, %.1f GB/s)\n",
                  std::string(KvTypeName(type)).c_str(), threads, threads > 1 ? "s" : " ", us / 1e3,
                  mb, mb * 1e3 / us);
    }
    for (BlockTable& table : tables) kc.Free(table);
  }
}

// One decode token of stories260K (dim 64, 5 layers, 8 heads / 4 kv heads, FFN 172, vocab
// 512) through the ops alone, at context 256: an upper bound on tokens/s.
void BenchStories260K() {
  const int64_t dim = 64, ffn = 172, vocab = 512, layers = 5, kv_dim = 32, n_ctx = 256;
  SetNumThreads(RecommendedNumThreads(vocab * dim));
  std::vector<float> wq = Random(dim * dim, 1), wk = Random(kv_dim * dim, 2),
                     wv = Random(kv_dim * dim, 3), wo = Random(dim * dim, 4),
                     w1 = Random(ffn * dim, 5), w3 = Random(ffn * dim, 6),
                     w2 = Random(dim * ffn, 7), wout = Random(vocab * dim, 8),
                     norm = Random(dim, 9);
  auto mk = [](const std::vector<float>& w, int64_t o, int64_t i) {
    return std::move(*Linear::Create(w.data(), o, i));
  };
  auto q_l = mk(wq, dim, dim), k_l = mk(wk, kv_dim, dim), v_l = mk(wv, kv_dim, dim),
       o_l = mk(wo, dim, dim), w1_l = mk(w1, ffn, dim), w3_l = mk(w3, ffn, dim),
       w2_l = mk(w2, dim, ffn), out_l = mk(wout, vocab, dim);
  const AttentionShape as{.n_heads = 8, .n_kv_heads = 4, .head_dim = 8, .block_size = 16};
  const RopeConfig rq{.n_heads = 8, .head_dim = 8, .rope_dim = 8};
  const RopeConfig rk{.n_heads = 4, .head_dim = 8, .rope_dim = 8};
  const int64_t per = 4 * 16 * 8;
  std::vector<float> kc = Random(16 * per, 10), vc = Random(16 * per, 11);
  std::vector<const float*> kb, vb;
  for (int b = 0; b < 16; ++b) {
    kb.push_back(kc.data() + b * per);
    vb.push_back(vc.data() + b * per);
  }
  std::vector<float> x = Random(dim, 12), h(dim), q(dim), k(kv_dim), v(kv_dim), att(dim), g(ffn),
                     u(ffn), logits(vocab);
  const int32_t pos = n_ctx - 1;
  const double us = TimeUs([&] {
    for (int64_t l = 0; l < layers; ++l) {
      RmsNorm(x.data(), 1, dim, norm.data(), 1e-5f, h.data());
      (void)q_l->Forward(h.data(), 1, q.data());
      (void)k_l->Forward(h.data(), 1, k.data());
      (void)v_l->Forward(h.data(), 1, v.data());
      Rope(rq, &pos, 1, q.data());
      Rope(rk, &pos, 1, k.data());
      (void)PagedAttention(as, q.data(), kb, vb, n_ctx, att.data());
      (void)o_l->Forward(att.data(), 1, h.data());
      Add(x.data(), h.data(), dim);
      RmsNorm(x.data(), 1, dim, norm.data(), 1e-5f, h.data());
      (void)w1_l->Forward(h.data(), 1, g.data());
      (void)w3_l->Forward(h.data(), 1, u.data());
      SiluMul(g.data(), u.data(), ffn);
      (void)w2_l->Forward(g.data(), 1, h.data());
      Add(x.data(), h.data(), dim);
    }
    RmsNorm(x.data(), 1, dim, norm.data(), 1e-5f, h.data());
    (void)out_l->Forward(h.data(), 1, logits.data());
    (void)ArgMax(logits.data(), vocab);
    for (float& e : x) e = std::max(-4.0f, std::min(4.0f, e));  // keep values bounded
  });
  std::printf(
      "\nstories260K decode token through the ops (n_ctx %lld, %d thread): %.2f us "
      "= %.0f tokens/s\n",
      static_cast<long long>(n_ctx), NumThreads(), us, 1e6 / us);
}

}  // namespace
}  // namespace textgen::ops

int main(int argc, char** argv) {
  bool weights_only = false, attention_only = false, kquant_only = false, invariance = false;
  bool f32_only = false;
  textgen::cli::FlagSet flags(
      "ops-bench",
      "ops-bench: per-call time of engine/ops kernels.\n\n"
      "Usage: ops-bench [--quick] [--weights | --attention | --kquant | --invariance | --f32]",
      textgen::cli::Wording::kExpected);
  flags.Flag("--quick", &textgen::ops::g_quick, "fewer shapes and repetitions");
  flags.Flag("--weights", &weights_only, "only the decode weight kernels");
  flags.Flag("--attention", &attention_only,
             "only the decode-step attention over an F32 and a BF16 KV cache");
  flags.Flag("--kquant", &kquant_only, "only Q4_K, Q6_K");
  flags.Flag("--invariance", &invariance,
             "only Linear with batch_invariant on vs off (prefill-sized calls)");
  flags.Flag("--f32", &f32_only,
             "only the F32 norm, activation, softmax and decode attention kernels (1 thread)");
  flags.Parse(argc, argv);
  if (f32_only) {
    textgen::ops::SetNumThreads(1);
    textgen::ops::BenchF32Kernels();
    return 0;
  }
  if (invariance) {
    textgen::ops::BenchInvariance();
    return 0;
  }
  if (kquant_only) {
    textgen::ops::BenchKQuant();
    return 0;
  }
  if (weights_only) {
    textgen::ops::BenchWeightKernels();
    return 0;
  }
  if (attention_only) {
    textgen::ops::BenchDecodeAttention();
    return 0;
  }
  textgen::ops::BenchLinear();
  textgen::ops::SetNumThreads(1);
  textgen::ops::BenchElementwise();
  textgen::ops::BenchAttention();
  textgen::ops::BenchDecodeAttention();
  textgen::ops::BenchStories260K();
  textgen::ops::BenchWeightKernels();
  textgen::ops::BenchKQuant();
  return 0;
}
