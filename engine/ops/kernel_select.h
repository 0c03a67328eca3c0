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
  // BF16 x BF16 dot products (compute bf16 on BF16 weights outside AMX) as F32 FMAs on
  // weights widened in registers rather than VDPBF16PS: see Bf16DotInF32().
  bool bf16_dot_in_f32 = true;
};

// The process's choice (made once, at the first call of this or of any kernel). Fails with
// InvalidArgument when TEXTGEN_MAX_ISA is not a level name (the kernels then run uncapped) or
// leaves no level of this build that the CPU can run (the lowest level then runs).
absl::StatusOr<KernelChoice> ChooseKernels();

// One line for the logs: "kernels: avx512vnni (built: avx2 avx512 ...; cpu: ...; ...)".
std::string DescribeKernels(const KernelChoice& choice);

// Whether Linear should be batch-invariant when the user leaves it to us (--batch-invariant
// auto): BatchInvariantByDefaultAt(the chosen level), false when the choice failed.
bool BatchInvariantByDefault();

// How --compute bf16 multiplies BF16 weights where AMX does not (the avx512bf16 level, and
// every level below it): true when the activations, rounded to BF16, are widened back to F32
// once per call and multiplied in F32 FMAs with the weights widened in registers; false when
// VDPBF16PS does it. The products are exact either way; the sums differ in order, so the
// choice is made once per process (for every row count: batch invariance). They are two
// numerics modes, and the default is fixed per build, not per CPU: `auto` is the F32 form,
// which every level runs, so the mode does not depend on whether a CPU has AVX512-BF16 (the
// F32 form's sums still differ between 8- and 16-lane levels, and AMX tiles are a third form:
// docs/kernels.md, One order at every level). VDPBF16PS is opt-in (TEXTGEN_BF16_DOT=vdpbf16ps;
// below a level with AVX512-BF16 it means f32): on Emerald Rapids it decoded one stream 10-20%
// faster and prefilled 10-20% slower (docs/kernels.md: BF16 dot products). True when the kernel
// choice failed.
bool Bf16DotInF32();

// The names TEXTGEN_MAX_ISA accepts, lowest first.
std::vector<std::string> IsaLevelNames();

// The extensions level `name` may use (the cap), e.g. "avx512" -> avx2, fma, f16c, avx512f/bw/
// vl/dq. InvalidArgument for an unknown name.
absl::StatusOr<CpuFeatures> IsaLevelFeatures(std::string_view name);

namespace internal {

// The --batch-invariant auto rule per kernel level: true at avx512, avx512vnni and avx512bf16,
// where the invariant row-streaming kernels measured as fast as or faster than oneDNN for many
// rows in the default bf16 mode (docs/kernels.md: Batch invariance); false at avx2 (F32 and Q8_0
// prefill-sized calls 1.2-1.9x slower), at amx (AMX tiles serve prefill; unmeasured with
// invariance) and for a one-level build named after its CPU ("native": unmeasured).
bool BatchInvariantByDefaultAt(std::string_view level);

// The Bf16DotInF32 rule: `level_has_dpbf16` (the chosen level has AVX512-BF16) and the
// TEXTGEN_BF16_DOT value (empty = auto). InvalidArgument for a value other than auto, vdpbf16ps
// and f32.
absl::StatusOr<bool> Bf16DotInF32For(bool level_has_dpbf16, std::string_view env);

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

// The level tables this process may run (the chosen level and every one below it), lowest
// first: the candidates kernel_calibration.h measures.
absl::Span<const KernelTable* const> RunnableKernelTables();

}  // namespace internal
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_KERNEL_SELECT_H_
