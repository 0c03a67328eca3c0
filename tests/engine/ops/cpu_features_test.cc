// The compile-time and CPUID views of the instruction-set extensions, and their comparison.
#include "engine/ops/cpu_features.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace textgen::ops {
namespace cpu_features_test {

TEST_CASE("the CPU running the tests has every extension the build uses", "[cpu]") {
  const CpuFeatures built = CompiledFeatures();
  const CpuFeatures cpu = DetectCpuFeatures();
  INFO("built: " << built.Names().size() << " extensions; cpu: " << cpu.Names().size());
  CHECK(MissingFeatures(built, cpu).empty());
#if defined(__AVX2__)
  CHECK(built.avx2);
  CHECK(cpu.avx2);
#endif
  // The extensions come in hardware generations: AVX-512 CPUs have AVX2, AMX ones AVX-512.
  if (cpu.avx512f) CHECK(cpu.avx2);
  if (cpu.amx_bf16) CHECK(cpu.avx512f);
  if (cpu.amx_bf16) CHECK(cpu.amx_tile);
}

TEST_CASE("unused and missing extensions are named", "[cpu]") {
  CpuFeatures built;
  built.avx2 = built.fma = true;
  CpuFeatures cpu = built;
  cpu.avx512f = cpu.amx_bf16 = true;
  cpu.fma = false;
  CHECK(built.Names() == std::vector<std::string>{"avx2", "fma"});
  CHECK(UnusedFeatures(built, cpu) == std::vector<std::string>{"avx512f", "amx_bf16"});
  CHECK(MissingFeatures(built, cpu) == std::vector<std::string>{"fma"});
  CHECK(UnusedFeatures(built, built).empty());
  CHECK(MissingFeatures(built, built).empty());
}

}  // namespace cpu_features_test
}  // namespace textgen::ops
