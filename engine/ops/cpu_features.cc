#include "engine/ops/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
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

CpuFeatures CompiledFeatures() {
  CpuFeatures f;
#if defined(__AVX2__)
  f.avx2 = true;
#endif
#if defined(__FMA__)
  f.fma = true;
#endif
#if defined(__F16C__)
  f.f16c = true;
#endif
#if defined(__AVX512F__)
  f.avx512f = true;
#endif
#if defined(__AVX512BW__)
  f.avx512bw = true;
#endif
#if defined(__AVX512VL__)
  f.avx512vl = true;
#endif
#if defined(__AVX512VNNI__)
  f.avx512_vnni = true;
#endif
#if defined(__AVX512BF16__)
  f.avx512_bf16 = true;
#endif
#if defined(__AMX_TILE__)
  f.amx_tile = true;
#endif
#if defined(__AMX_BF16__)
  f.amx_bf16 = true;
#endif
  return f;
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

}  // namespace textgen::ops
