// The per-level namespace of the kernels compiled once per instruction-set level.
//
// engine/CMakeLists.txt compiles each kernel translation unit (the ones that branch on
// __AVX512F__ and friends) once per level, with that level's -m flags and
// -DTEXTGEN_ISA_LEVEL=<level>. Everything those units define, and every inline helper they
// include (simd.h, quant_unpack.h, half.h, ...), sits in an inline namespace named after the
// level, so the AVX-512 copy of an inline function has another mangled name than the AVX2
// copy: otherwise the linker would keep one of the two for every caller (one definition
// rule), and an AVX2-only CPU could end up running AVX-512 code. Code compiled for the
// baseline (no TEXTGEN_ISA_LEVEL) declares the same names in the enclosing namespace; there
// the kernels' public functions are the dispatching entry points of kernel_dispatch.cc.
#ifndef TEXTGEN_ENGINE_OPS_ISA_NAMESPACE_H_
#define TEXTGEN_ENGINE_OPS_ISA_NAMESPACE_H_

#if defined(TEXTGEN_ISA_LEVEL)
#define TG_ISA_BEGIN inline namespace TEXTGEN_ISA_LEVEL {
#define TG_ISA_END }
#else
#define TG_ISA_BEGIN
#define TG_ISA_END
#endif

#endif  // TEXTGEN_ENGINE_OPS_ISA_NAMESPACE_H_
