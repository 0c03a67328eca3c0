#include "engine/ops/onednn_matmul.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/ops/simd.h"
#include "engine/ops/threading.h"

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

// Round-to-nearest-even F32 -> BF16, n values.
void ToBf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    std::memcpy(out + i, &v, sizeof(v));
  }
#endif
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
      continue;
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    out[i] = static_cast<uint16_t>(bits >> 16);
  }
}

// Per-thread state of Run: grows to the largest request seen on the thread and is reused.
struct ThreadScratch {
  std::vector<uint8_t> scratchpad;
  std::vector<uint16_t> x_bf16;
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

absl::StatusOr<std::unique_ptr<OneDnnMatmul>> OneDnnMatmul::Create(const float* w, int64_t out,
                                                                   int64_t in,
                                                                   LinearCompute compute) {
  auto m = std::unique_ptr<OneDnnMatmul>(new OneDnnMatmul());
  m->out_ = out;
  m->in_ = in;
  m->compute_ = compute;
  try {
    const dnnl::engine& eng = CpuEngine();
    const dt act = compute == LinearCompute::kBf16 ? dt::bf16 : dt::f32;
    // The matmul computes src[M, K] · wei[K, N]. W [out, in] row-major is wei [in, out] with
    // the `ba` tag (column-major), so the file's layout is used as is.
    const dnnl::memory::desc src_md({DNNL_RUNTIME_DIM_VAL, in}, act, tag::ab);
    const dnnl::memory::desc wei_md({in, out}, act, tag::ba);
    const dnnl::memory::desc dst_md({DNNL_RUNTIME_DIM_VAL, out}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, eng);
    m->primitive_ = dnnl::matmul(pd);
    m->scratchpad_bytes_ = pd.scratchpad_desc().get_size();
    if (compute == LinearCompute::kBf16) {
      m->w_bf16_.resize(static_cast<size_t>(out * in));
      ToBf16(w, out * in, m->w_bf16_.data());
      m->weights_ = dnnl::memory(wei_md, eng, m->w_bf16_.data());
    } else {
      m->weights_ = dnnl::memory(wei_md, eng, const_cast<float*>(w));
    }
    m->name_ = absl::StrCat("onednn:", pd.impl_info_str(),
                            compute == LinearCompute::kBf16 ? ":bf16" : ":f32");
  } catch (const dnnl::error& e) {
    return FromDnnlError(e, "matmul creation");
  }
  return m;
}

absl::Status OneDnnMatmul::Run(const float* x, int64_t n, float* y) const {
  internal::ApplyThreadCountToThisThread();
  ThreadScratch& scratch = Scratch();
  try {
    const dnnl::engine& eng = CpuEngine();
    const void* src = x;
    dt src_type = dt::f32;
    if (compute_ == LinearCompute::kBf16) {
      scratch.x_bf16.resize(std::max(scratch.x_bf16.size(), static_cast<size_t>(n * in_)));
      ToBf16(x, n * in_, scratch.x_bf16.data());
      src = scratch.x_bf16.data();
      src_type = dt::bf16;
    }
    // oneDNN takes non-const handles for all memories; src is only read.
    dnnl::memory src_mem({{n, in_}, src_type, tag::ab}, eng, const_cast<void*>(src));
    dnnl::memory dst_mem({{n, out_}, dt::f32, tag::ab}, eng, y);
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_mem}};
    if (scratchpad_bytes_ > 0) {
      if (scratchpad_bytes_ > scratch.scratchpad.size()) {
        scratch.scratchpad.resize(scratchpad_bytes_);
      }
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory({{static_cast<int64_t>(scratchpad_bytes_)}, dt::u8, tag::a}, eng,
                                scratch.scratchpad.data()));
    }
    dnnl::stream& stream = ThreadStream();
    primitive_.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return FromDnnlError(e, "matmul execution");
  }
  return absl::OkStatus();
}

}  // namespace textgen::ops
