// The AMX half of AmxBf16Matmul (engine/ops/amx_matmul.h): weight packing and the tile loops,
// compiled only at the amx level (at the others these functions are not built and the kernel
// table holds null pointers for them). The class itself, its checks and its allocation are
// baseline code.
#ifndef TEXTGEN_ENGINE_OPS_AMX_TILES_H_
#define TEXTGEN_ENGINE_OPS_AMX_TILES_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"
#include "engine/ops/weight.h"

namespace textgen::ops {

// What one AmxBf16Matmul call reads: its packed weights (layout: AmxBf16Matmul::packed_) and
// their shape.
struct AmxPackedWeights {
  const uint16_t* data = nullptr;
  int64_t out = 0;
  int64_t in = 0;
  int64_t out_blocks = 0;  // ceil(out / 16)
  int64_t k_blocks = 0;    // ceil(in / 32)
  int64_t bytes = 0;       // packed size, padding included
  int64_t parallel_min_bytes = 0;
};

TG_ISA_BEGIN
namespace amx_tiles {

// W [out, in] BF16 row-major -> dst, all out_blocks blocks (on NumThreads() threads).
void PackWeights(const uint16_t* w, int64_t out, int64_t in, int64_t k_blocks, int64_t out_blocks,
                 uint16_t* dst);
// y [n, out] = x [n, in] · Wᵀ (AmxBf16Matmul::Run).
void Run(const AmxPackedWeights& p, const float* x, int64_t n, float* y);
// AmxBf16Matmul::RunWidened, after its checks.
void RunWidened(const WeightView& w, int64_t tile_rows, const float* x, int64_t n, float* y);

}  // namespace amx_tiles
TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_AMX_TILES_H_
