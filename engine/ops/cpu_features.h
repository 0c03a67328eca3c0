// The x86 instruction-set extensions the kernels were compiled for, and those this CPU has.
// The kernels are chosen at compile time (TEXTGEN_MARCH), so a binary built for a baseline
// such as x86-64-v3 runs its AVX2 code even on a CPU with AVX-512 and AMX; the server logs
// both sets at startup so that such a mismatch (often 5x+ slower decode) is visible.
#ifndef TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_
#define TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_

#include <string>
#include <vector>

namespace textgen::ops {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;

  // The names of the extensions set, e.g. {"avx2", "fma", "f16c"}.
  std::vector<std::string> Names() const;
};

// From the compiler's predefined macros (-march).
CpuFeatures CompiledFeatures();
// From CPUID (and, for AVX-512 and AMX, whether the OS enabled their register state).
CpuFeatures DetectCpuFeatures();
// Extensions the CPU has that the build leaves unused, e.g. {"avx512f", "amx_bf16"}.
std::vector<std::string> UnusedFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu);
// Extensions the build needs that the CPU lacks (the binary may die with SIGILL).
std::vector<std::string> MissingFeatures(const CpuFeatures& compiled, const CpuFeatures& cpu);

}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_CPU_FEATURES_H_
