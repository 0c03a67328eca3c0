#include "engine/ops/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>

namespace textgen::ops {
namespace {

// Every field with its name, so that Names/Unused/Missing stay in one list.
template <typename F>
void ForEachFeature(const CpuFeatures& a, const CpuFeatures& b, F f) {
  f("avx2", a.avx2, b.avx2);
  f("fma", a.fma, b.fma);
  f("f16c", a.f16c, b.f16c);
  f("avx512f", a.avx512f, b.avx512f);
  f("avx512bw", a.avx512bw, b.avx512bw);
  f("avx512vl", a.avx512vl, b.avx512vl);
  f("avx512dq", a.avx512dq, b.avx512dq);
  f("avx512_vnni", a.avx512_vnni, b.avx512_vnni);
  f("avx512_bf16", a.avx512_bf16, b.avx512_bf16);
  f("amx_tile", a.amx_tile, b.amx_tile);
  f("amx_bf16", a.amx_bf16, b.amx_bf16);
}

#if defined(__x86_64__)
uint64_t Xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}
#endif

}  // namespace

std::vector<std::string> CpuFeatures::Names() const {
  std::vector<std::string> names;
  ForEachFeature(*this, *this, [&](const char* name, bool has, bool) {
    if (has) names.push_back(name);
  });
  return names;
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  f.fma = (ecx & (1u << 12)) != 0;
  f.f16c = (ecx & (1u << 29)) != 0;
  const uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  const bool ymm_state = (xcr0 & 0x6) == 0x6;           // SSE and AVX registers saved by the OS
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;         // ... and the AVX-512 opmask/upper ZMM
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  f.fma = f.fma && ymm_state;
  f.f16c = f.f16c && ymm_state;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2 = ymm_state && (ebx & (1u << 5)) != 0;
  f.avx512f = zmm_state && (ebx & (1u << 16)) != 0;
  f.avx512bw = zmm_state && (ebx & (1u << 30)) != 0;
  f.avx512vl = zmm_state && (ebx & (1u << 31)) != 0;
  f.avx512dq = zmm_state && (ebx & (1u << 17)) != 0;
  f.avx512_vnni = zmm_state && (ecx & (1u << 11)) != 0;
  f.amx_bf16 = tile_state && (edx & (1u << 22)) != 0;
  f.amx_tile = tile_state && (edx & (1u << 24)) != 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    f.avx512_bf16 = zmm_state && (eax & (1u << 5)) != 0;
  }
#endif
  return f;
}

std::vector<std::string> UnusedFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu) {
  std::vector<std::string> out;
  ForEachFeature(compiled, cpu, [&](const char* name, bool built, bool has) {
    if (has && !built) out.push_back(name);
  });
  return out;
}

std::vector<std::string> MissingFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu) {
  std::vector<std::string> out;
  ForEachFeature(compiled, cpu, [&](const char* name, bool built, bool has) {
    if (built && !has) out.push_back(name);
  });
  return out;
}

bool RequestAmxPermission() {
#if defined(__x86_64__)
  constexpr int kArchGetXcompPerm = 0x1022;
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  // Fails on kernels before 5.16 or when the OS has not enabled the tile state in XCR0.
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long permitted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) != 0) return false;
  return (permitted & (1ul << kXfeatureXtiledata)) != 0;
#else
  return false;
#endif
}

}  // namespace textgen::ops
