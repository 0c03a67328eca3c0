// The kernel level choice: level names, the selection rule on fake tables, and every level
// this binary has and this CPU runs computing what the lowest level computes.
#include "engine/ops/kernel_select.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/ops/kernel_table.h"
#include "tests/engine/ops/ops_test_util.h"

namespace textgen::ops {
namespace kernel_select_test {

TEST_CASE("each level name allows its predecessor's extensions and more", "[isa]") {
  const std::vector<std::string> names = IsaLevelNames();
  REQUIRE(names == std::vector<std::string>{"avx2", "avx512", "avx512vnni", "avx512bf16", "amx"});
  CpuFeatures previous;
  for (const std::string& name : names) {
    const absl::StatusOr<CpuFeatures> f = IsaLevelFeatures(name);
    REQUIRE(f.ok());
    CHECK(internal::FeaturesCover(*f, previous));
    CHECK_FALSE(internal::FeaturesCover(previous, *f));
    previous = *f;
  }
  CHECK(IsaLevelFeatures("avx512").value().avx512dq);
  CHECK_FALSE(IsaLevelFeatures("avx512vnni").value().avx512_bf16);
  const absl::StatusOr<CpuFeatures> bad = IsaLevelFeatures("avx3");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad.status().message()).find("avx3") != std::string::npos);
}

TEST_CASE("Batch-invariant auto is on exactly at the measured AVX-512 levels", "[isa]") {
  // avx2: many-row F32/Q8_0 calls slower with it; amx and one-level native builds: unmeasured.
  for (const std::string& level : IsaLevelNames()) {
    INFO(level);
    CHECK(internal::BatchInvariantByDefaultAt(level) ==
          (level == "avx512" || level == "avx512vnni" || level == "avx512bf16"));
  }
  CHECK_FALSE(internal::BatchInvariantByDefaultAt("native"));
  CHECK_FALSE(internal::BatchInvariantByDefaultAt(""));
}

TEST_CASE("BF16 dot products use VDPBF16PS where the level has it, unless told f32") {
  using internal::Bf16DotInF32For;
  CHECK(Bf16DotInF32For(false, "").value());  // no VDPBF16PS at the level
  CHECK(Bf16DotInF32For(false, "auto").value());
  // The default is the F32 form at every level (fixed per build, not per CPU).
  CHECK(Bf16DotInF32For(true, "").value());
  CHECK(Bf16DotInF32For(true, "auto").value());
  CHECK(Bf16DotInF32For(true, "f32").value());
  CHECK_FALSE(Bf16DotInF32For(true, "vdpbf16ps").value());
  CHECK(Bf16DotInF32For(false, "vdpbf16ps").value());  // asked for, not there
  const absl::StatusOr<bool> bad = Bf16DotInF32For(true, "bf16");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad.status().message()).find("TEXTGEN_BF16_DOT=bf16") != std::string::npos);
  // The process's choice is the rule applied to its level (TEXTGEN_BF16_DOT unset in the
  // tests, or set by the caller to exercise one form).
  const absl::StatusOr<KernelChoice> choice = ChooseKernels();
  REQUIRE(choice.ok());
  const char* env = std::getenv("TEXTGEN_BF16_DOT");
  // From the chosen table's needs, not its name: a one-level build (-DTEXTGEN_MARCH=native, as
  // the sanitizer builds) names its level after the CPU.
  bool has_dot = false;
  for (const KernelTable* t : internal::BuiltKernelTables()) {
    if (choice->level == t->level) has_dot = t->required.avx512_bf16;
  }
  CHECK(Bf16DotInF32() == Bf16DotInF32For(has_dot, env == nullptr ? "" : env).value());
  CHECK(DescribeKernels(*choice).find(Bf16DotInF32()
                                          ? "bf16 dot products: f32 fma"
                                          : "bf16 dot products: vdpbf16ps") != std::string::npos);
}

// Tables that need a level's extensions (no functions: the selection reads only the needs).
KernelTable FakeTable(const char* level) {
  KernelTable t{};
  t.level = level;
  t.required = IsaLevelFeatures(level).value();
  return t;
}

TEST_CASE("the highest level the allowed extensions cover is chosen", "[isa]") {
  const KernelTable avx2 = FakeTable("avx2"), avx512 = FakeTable("avx512"),
                    vnni = FakeTable("avx512vnni"), bf16 = FakeTable("avx512bf16"),
                    amx = FakeTable("amx");
  const std::vector<const KernelTable*> tables = {&avx2, &avx512, &vnni, &bf16, &amx};
  int asked = 0;
  auto granted = [&] { return ++asked, true; };
  auto refused = [&] { return ++asked, false; };
  std::vector<std::string> notes;

  SECTION("an Ice Lake: AVX-512 with VNNI, no BF16") {
    CpuFeatures icx = IsaLevelFeatures("avx512vnni").value();
    CHECK(internal::SelectKernelTable(tables, icx, granted, &notes) == &vnni);
    CHECK(asked == 0);  // no AMX: no permission request
    REQUIRE(notes.size() == 2);
    CHECK(notes[0] == "amx needs avx512_bf16 amx_tile amx_bf16");
  }
  SECTION("a Sapphire Rapids, permission granted or refused") {
    const CpuFeatures spr = IsaLevelFeatures("amx").value();
    CHECK(internal::SelectKernelTable(tables, spr, granted, &notes) == &amx);
    CHECK(internal::SelectKernelTable(tables, spr, refused, &notes) == &bf16);
    CHECK(asked == 2);
    CHECK(notes.back() == "amx: Linux refused the AMX tile state");
  }
  SECTION("an AVX2-only CPU, and one below the baseline") {
    CHECK(internal::SelectKernelTable(tables, IsaLevelFeatures("avx2").value(), granted, &notes) ==
          &avx2);
    CHECK(internal::SelectKernelTable(tables, CpuFeatures{}, granted, &notes) == nullptr);
  }
  SECTION("a single-level build compiled for more than the CPU has") {
    const std::vector<const KernelTable*> only = {&bf16};
    CHECK(internal::SelectKernelTable(only, IsaLevelFeatures("avx512vnni").value(), granted,
                                      &notes) == nullptr);
  }
}

TEST_CASE("the process runs the highest built level within the CPU and TEXTGEN_MAX_ISA", "[isa]") {
  const absl::StatusOr<KernelChoice> choice = ChooseKernels();
  REQUIRE(choice.ok());
  INFO(DescribeKernels(*choice));
  CpuFeatures allowed = choice->cpu;
  const char* cap = std::getenv("TEXTGEN_MAX_ISA");
  CHECK(choice->cap == (cap == nullptr ? "" : cap));
  const KernelTable& chosen = internal::Kernels();
  CHECK(chosen.level == choice->level);
  CHECK(internal::FeaturesCover(allowed, chosen.required));
  if (cap != nullptr)
    CHECK(internal::FeaturesCover(IsaLevelFeatures(cap).value(), chosen.required));
  // No higher built level would have qualified (AMX permission aside).
  bool above = false;
  for (const KernelTable* t : internal::BuiltKernelTables()) {
    if (above && !t->required.amx_tile) {
      const bool capped =
          cap != nullptr && !internal::FeaturesCover(IsaLevelFeatures(cap).value(), t->required);
      CHECK((capped || !internal::FeaturesCover(allowed, t->required)));
    }
    above = above || t == &chosen;
  }
}

// Every level the CPU can run against the lowest level's portable code: the dispatch plumbing
// (each table entry is the function its name says) and each level's SIMD paths.
TEST_CASE("every runnable level computes what the portable kernels compute", "[isa]") {
  const CpuFeatures cpu = DetectCpuFeatures();
  const KernelTable& base = *internal::BuiltKernelTables().front();
  const int64_t out = 37, in = 96, n = 3;
  const std::vector<float> w = testing::Random(out * in, 1), x = testing::Random(n * in, 2);
  const WeightView wv{WeightType::kF32, w.data(), out, in};
  std::vector<float> want(n * out);
  base.portable_gemv_f32(wv, x.data(), n, want.data(), out, 0, out);
  std::vector<BlockQ8_0> wq(out * in / 32), xq(n * in / 32);
  base.portable_quantize_activations_q8_0(w.data(), out, in, wq.data());
  base.portable_quantize_activations_q8_0(x.data(), n, in, xq.data());
  const WeightView qv{WeightType::kQ8_0, wq.data(), out, in};
  std::vector<float> want_q(n * out);
  base.portable_gemv_q8_0_vnni(qv, xq.data(), n, want_q.data(), out, 0, out);
  std::vector<float> probs = x;
  base.softmax(probs.data(), in);
  int runnable = 0;
  for (const KernelTable* t : internal::BuiltKernelTables()) {
    if (!internal::FeaturesCover(cpu, t->required)) continue;
    ++runnable;
    INFO("level " << t->level);
    std::vector<float> y(n * out, NAN), yq(n * out, NAN), p = x;
    t->gemv_f32(wv, x.data(), n, y.data(), out, 0, out);
    std::vector<BlockQ8_0> xq2(n * in / 32);
    t->quantize_activations_q8_0(x.data(), n, in, xq2.data());
    t->gemv_q8_0_vnni(qv, xq2.data(), n, yq.data(), out, 0, out);
    t->softmax(p.data(), in);
    for (int64_t i = 0; i < n * out; ++i) {
      CHECK(y[i] == Approx(want[i]).margin(1e-4));
      CHECK(yq[i] == Approx(want_q[i]).margin(1e-3));
    }
    for (int64_t i = 0; i < in; ++i) CHECK(p[i] == Approx(probs[i]).margin(1e-6));
  }
  CHECK(runnable >= 1);
}

}  // namespace kernel_select_test
}  // namespace textgen::ops
