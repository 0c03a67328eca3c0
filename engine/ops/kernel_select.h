// Which instruction-set level of the kernels runs.
//
// The kernels are compiled once per level (engine/CMakeLists.txt: avx2, avx512, avx512vnni,
// avx512bf16, amx by default) and one level is chosen for the whole process at the first
// kernel call: the highest one whose extensions the CPU has and the OS saves (CPUID, XGETBV),
// for amx also once Linux grants the tile state. TEXTGEN_MAX_ISA=<level> caps the choice (the
// tests run every level a machine has this way) and caps oneDNN's ISA to match.
#ifndef TEXTGEN_ENGINE_OPS_KERNEL_SELECT_H_
#define TEXTGEN_ENGINE_OPS_KERNEL_SELECT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/ops/cpu_features.h"

namespace textgen::ops {

struct KernelTable;

struct KernelChoice {
  std::string level;               // the chosen level, e.g. "avx512vnni"
  std::vector<std::string> built;  // the levels in this binary, lowest first
  std::string cap;                 // TEXTGEN_MAX_ISA, empty when unset
  std::vector<std::string> notes;  // why higher built levels were passed over
  CpuFeatures cpu;                 // what CPUID and XGETBV report
};

// The process's choice (made once, at the first call of this or of any kernel). Fails with
// InvalidArgument when TEXTGEN_MAX_ISA is not a level name (the kernels then run uncapped) or
// leaves no level of this build that the CPU can run (the lowest level then runs).
absl::StatusOr<KernelChoice> ChooseKernels();

// One line for the logs: "kernels: avx512vnni (built: avx2 avx512 ...; cpu: ...; ...)".
std::string DescribeKernels(const KernelChoice& choice);

// Whether Linear should be batch-invariant when the user leaves it to us (--batch-invariant
// auto): true at the avx512 and avx512vnni levels, where the invariant row-streaming kernels
// measured as fast as or faster than oneDNN for many rows (README: Batch invariance); false at
// avx2 (measured 1.4-10x slower prefill: no many-row AVX2 K-quant tiles yet) and at avx512bf16
// and amx (native BF16 oneDNN / AMX tiles for many rows: the cost there is unmeasured), and
// false when the choice failed.
bool BatchInvariantByDefault();

// The names TEXTGEN_MAX_ISA accepts, lowest first.
std::vector<std::string> IsaLevelNames();

// The extensions level `name` may use (the cap), e.g. "avx512" -> avx2, fma, f16c, avx512f/bw/
// vl/dq. InvalidArgument for an unknown name.
absl::StatusOr<CpuFeatures> IsaLevelFeatures(std::string_view name);

namespace internal {

// True when every extension `need` has is in `have`.
bool FeaturesCover(const CpuFeatures& have, const CpuFeatures& need);

// The highest of `tables` (lowest first) whose needs `allowed` covers and, for a level with AMX
// tiles, for which `amx_granted()` is true (called at most once, only for such a level).
// Null when none qualifies; `notes` gets one line per table passed over.
const KernelTable* SelectKernelTable(absl::Span<const KernelTable* const> tables,
                                     const CpuFeatures& allowed,
                                     absl::FunctionRef<bool()> amx_granted,
                                     std::vector<std::string>* notes);

// Every level table in this binary, lowest first.
absl::Span<const KernelTable* const> BuiltKernelTables();

}  // namespace internal
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KERNEL_SELECT_H_
