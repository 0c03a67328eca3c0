// This level's KernelTable (compiled once per level, like the kernels; kernel_table.h).
#include "engine/ops/amx_tiles.h"
#include "engine/ops/attention_kernel.h"
#include "engine/ops/cpu_features.h"
#include "engine/ops/direct_matmul.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/format_kernels.h"
#include "engine/ops/gemv_bf16_dot.h"
#include "engine/ops/gemv_float.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kernel_table.h"
#include "engine/ops/kquant_dot.h"
#include "engine/ops/kquant_dot_more.h"
#include "engine/ops/q8_0_gemv.h"
#include "engine/ops/quant_decode.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/quant_gemv.h"
#include "engine/ops/softmax.h"
#include "engine/ops/weight_convert.h"

#if !defined(TEXTGEN_ISA_LEVEL)
#error "kernel_table_level.cc is compiled once per level, with -DTEXTGEN_ISA_LEVEL=<level>"
#endif

#define TG_STRINGIFY2(x) #x
#define TG_STRINGIFY(x) TG_STRINGIFY2(x)

namespace textgen::ops {
TG_ISA_BEGIN

extern const FormatCatalogue kFormatKernels;  // format_kernels.cc
extern const KernelTable kKernelTable;
const KernelTable kKernelTable = {
    TG_STRINGIFY(TEXTGEN_ISA_LEVEL),
    CompiledFeatures(),
#define TG_KERNEL(member, fn, ret, params, args) &fn,
#include "engine/ops/kernel_list.inc"
#undef TG_KERNEL
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
    &amx_tiles::PackWeights,
    &amx_tiles::Run,
    &amx_tiles::RunWidened,
#else
    nullptr,
    nullptr,
    nullptr,
#endif
    &kFormatKernels,
};

TG_ISA_END
}  // namespace textgen::ops
