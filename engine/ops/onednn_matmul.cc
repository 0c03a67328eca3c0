#include "engine/ops/onednn_matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/kernel_select.h"
#include "engine/ops/threading.h"
#include "engine/ops/weight_convert.h"
#include "engine/util/status_macros.h"

namespace textgen::ops {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

absl::Status FromDnnlError(const dnnl::error& e, const char* what) {
  const std::string msg = absl::StrCat("oneDNN ", what, ": ", e.what());
  return e.status == dnnl_unimplemented ? absl::UnimplementedError(msg) : absl::InternalError(msg);
}

// Per-thread oneDNN scratchpad: grows to the largest request seen on the thread, reused.
struct ThreadScratch {
  std::vector<uint8_t> scratchpad;
};

ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

dnnl::stream& ThreadStream() {
  // A stream per thread: streams are not meant to be shared by concurrent executions.
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

}  // namespace

absl::StatusOr<OneDnnMatmul::Prim> OneDnnMatmul::MakePrim(int64_t n_cols, int64_t ldy) {
  const dt act = compute_ == LinearCompute::kBf16 ? dt::bf16 : dt::f32;
  // The matmul computes src[M, K] · wei[K, N]. W [N, K] row-major is wei [K, N] with the `ba`
  // tag (column-major), so stored (or widened) rows are used as they lie. dst rows are `ldy`
  // apart so a tile of W writes its columns of y in place.
  const dnnl::memory::desc src_md({DNNL_RUNTIME_DIM_VAL, w_.in}, act, tag::ab);
  const dnnl::memory::desc wei_md({w_.in, n_cols}, act, tag::ba);
  const dnnl::memory::desc dst_md({DNNL_RUNTIME_DIM_VAL, n_cols}, dt::f32, {ldy, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr,
                                        CpuEngine());
  Prim p;
  p.matmul = dnnl::matmul(pd);
  p.scratchpad_bytes = pd.scratchpad_desc().get_size();
  if (name_.empty()) {
    name_ = absl::StrCat("onednn:", pd.impl_info_str(),
                         compute_ == LinearCompute::kBf16 ? ":bf16" : ":f32");
  }
  return p;
}

absl::StatusOr<std::unique_ptr<OneDnnMatmul>> OneDnnMatmul::Create(const WeightView& w,
                                                                   LinearCompute compute) {
  // The kernel choice caps oneDNN's ISA under TEXTGEN_MAX_ISA, which only takes effect before
  // oneDNN's first primitive: make it now if no kernel ran yet.
  (void)ChooseKernels();
  auto m = std::unique_ptr<OneDnnMatmul>(new OneDnnMatmul());
  m->w_ = w;
  m->compute_ = compute;
  const bool in_place = (w.type == WeightType::kF32 && compute == LinearCompute::kF32) ||
                        (w.type == WeightType::kBf16 && compute == LinearCompute::kBf16);
  m->chunked_ = !in_place;
  try {
    if (in_place) {
      TG_ASSIGN_OR_RETURN(m->whole_, m->MakePrim(w.out, w.out));
    } else {
      // Tiles of ~1 MiB in the compute type, whole 16-row groups, and at least two tiles per
      // thread so dynamic scheduling balances. Why 1 MiB: each tile is one oneDNN call over
      // all n rows, and thin tiles (16 rows of a 5632-wide TinyLlama ffn_down at 256 KB) pay
      // the call and packing overhead per few columns; prefill-128 of Q4_K_M went from 259 to
      // 323-329 tok/s (TinyLlama) and 3,010-3,055 to 3,424-3,494 (stories110M) on Zen 5 (1 MiB
      // L2 per core), with 2 MiB no better.
      const int64_t elem = compute == LinearCompute::kBf16 ? 2 : 4;
      int64_t rows = std::max<int64_t>(16, (int64_t{1} << 20) / (w.in * elem) / 16 * 16);
      const int64_t cores = DefaultNumThreads();
      const int64_t per_thread = (w.out + 2 * cores - 1) / (2 * cores);
      rows = std::min(rows, std::max<int64_t>(16, (per_thread + 15) / 16 * 16));
      m->chunk_rows_ = std::min(rows, w.out);
      TG_ASSIGN_OR_RETURN(m->chunk_, m->MakePrim(m->chunk_rows_, w.out));
      if (w.out % m->chunk_rows_ != 0) {
        TG_ASSIGN_OR_RETURN(m->tail_, m->MakePrim(w.out % m->chunk_rows_, w.out));
      }
      absl::StrAppend(&m->name_, ":widen-", WeightTypeName(w.type));
    }
  } catch (const dnnl::error& e) {
    return FromDnnlError(e, "matmul creation");
  }
  return m;
}

absl::Status OneDnnMatmul::Execute(const Prim& p, const void* src, int64_t n, const void* wei,
                                   int64_t cols, float* y) const {
  ThreadScratch& scratch = Scratch();
  try {
    const dnnl::engine& eng = CpuEngine();
    const dt act = compute_ == LinearCompute::kBf16 ? dt::bf16 : dt::f32;
    // oneDNN takes non-const handles for all memories; src and weights are only read.
    dnnl::memory src_mem({{n, w_.in}, act, tag::ab}, eng, const_cast<void*>(src));
    dnnl::memory wei_mem({{w_.in, cols}, act, tag::ba}, eng, const_cast<void*>(wei));
    dnnl::memory dst_mem({{n, cols}, dt::f32, {w_.out, 1}}, eng, y);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    if (p.scratchpad_bytes > 0) {
      if (p.scratchpad_bytes > scratch.scratchpad.size()) {
        scratch.scratchpad.resize(p.scratchpad_bytes);
      }
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory({{static_cast<int64_t>(p.scratchpad_bytes)}, dt::u8, tag::a}, eng,
                                scratch.scratchpad.data()));
    }
    dnnl::stream& stream = ThreadStream();
    p.matmul.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromDnnlError(e, "matmul execution");
  }
  return absl::OkStatus();
}

absl::Status OneDnnMatmul::RunChunked(const void* src, int64_t n, float* y) const {
  const int64_t chunks = (w_.out + chunk_rows_ - 1) / chunk_rows_;
  const bool bf16 = compute_ == LinearCompute::kBf16;
  std::atomic<bool> failed{false};
  absl::Status first_error;
#pragma omp parallel for schedule(dynamic) num_threads(NumThreads())
  for (int64_t c = 0; c < chunks; ++c) {
    if (failed.load(std::memory_order_relaxed)) continue;
    const int64_t r0 = c * chunk_rows_, r1 = std::min(w_.out, r0 + chunk_rows_);
    // Widened tile W[r0:r1, :] in the compute type, private to this thread.
    thread_local std::vector<uint8_t> tile;
    tile.resize(static_cast<size_t>((r1 - r0) * w_.in * (bf16 ? 2 : 4)));
    if (bf16) {
      ConvertRowsBf16(w_, r0, r1, reinterpret_cast<uint16_t*>(tile.data()));
    } else {
      ConvertRowsF32(w_, r0, r1, reinterpret_cast<float*>(tile.data()));
    }
    absl::Status st =
        Execute(r1 - r0 == chunk_rows_ ? chunk_ : tail_, src, n, tile.data(), r1 - r0, y + r0);
    if (!st.ok()) {
#pragma omp critical(textgen_onednn_error)
      if (first_error.ok()) first_error = st;
      failed.store(true, std::memory_order_relaxed);
    }
  }
  return first_error;
}

absl::Status OneDnnMatmul::Run(const float* x, int64_t n, float* y) const {
  internal::ApplyThreadCountToThisThread();
  const void* src = x;
  if (compute_ == LinearCompute::kBf16) {
    thread_local std::vector<uint16_t> x_bf16;  // [n, in], shared read-only by the tiles
    x_bf16.resize(std::max(x_bf16.size(), static_cast<size_t>(n * w_.in)));
    ToBf16Activations(x, n * w_.in, x_bf16.data());
    src = x_bf16.data();
  }
  if (chunked_) return RunChunked(src, n, y);
  return Execute(whole_, src, n, w_.data, w_.out, y);
}

}  // namespace textgen::ops
