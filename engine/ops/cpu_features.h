// The x86 instruction-set extensions a piece of code was compiled for, and those this CPU has.
// The kernels are compiled once per level and chosen at run time from the CPU's set
// (engine/ops/kernel_select.h); the rest of the code needs only the baseline (x86-64-v3).
#ifndef TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_
#define TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_

#include <string>
#include <vector>

#include "engine/ops/isa_namespace.h"

namespace textgen::ops {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;

  // The names of the extensions set, e.g. {"avx2", "fma", "f16c"}.
  std::vector<std::string> Names() const;
};

// From CPUID (and, for AVX-512 and AMX, whether the OS enabled their register state).
CpuFeatures DetectCpuFeatures();
// Extensions the CPU has that the build leaves unused, e.g. {"avx512f", "amx_bf16"}.
std::vector<std::string> UnusedFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu);
// Extensions the build needs that the CPU lacks (the binary may die with SIGILL).
std::vector<std::string> MissingFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu);

// Asks Linux for the AMX tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), needed
// before the first tile instruction; Linux 5.16+). True when granted. Process-wide; repeated
// requests are harmless.
bool RequestAmxPermission();

TG_ISA_BEGIN
// From the compiler's predefined macros (-march and -m flags) where it is compiled: in a
// kernel translation unit, what that level needs; elsewhere, what the baseline needs.
constexpr CpuFeatures CompiledFeatures() {
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
#if defined(__AVX512DQ__)
  f.avx512dq = true;
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
TG_ISA_END

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_
