// Row quantizers F32 -> ggml blocks, one per format, following ggml's reference quantizers
// (ggml-quants.c: quantize_row_*_ref, and quantize_iq4_nl / quantize_iq4_xs without an
// importance matrix): what `llama-quantize` writes when given no imatrix. FromF32 (quantize.h)
// is the front door; these are exposed for tests and benchmarks.
//
// Every function converts `n` values of `x` (n a multiple of the format's block size, checked
// by the caller) into n / block_size blocks at `y` (no alignment needed). They are pure
// functions of the input: thread-safe, and the bytes do not depend on how rows are split.
//
// Bit-exactness with llama.cpp depends on doing the same IEEE operations in the same order, so
// the .cc files are compiled with -ffp-contract=off (no fused multiply-add: ggml-base, where
// ggml's quantizers live, is built without -march flags and so never fuses).
#ifndef TEXTGEN_ENGINE_FORMAT_QUANTIZE_ROWS_H_
#define TEXTGEN_ENGINE_FORMAT_QUANTIZE_ROWS_H_

#include <cstdint>

namespace textgen {

// Blocks of 32 (quantize_legacy.cc).
void QuantizeRowQ4_0(const float* x, void* y, int64_t n);
void QuantizeRowQ4_1(const float* x, void* y, int64_t n);
void QuantizeRowQ5_0(const float* x, void* y, int64_t n);
void QuantizeRowQ5_1(const float* x, void* y, int64_t n);
void QuantizeRowIQ4_NL(const float* x, void* y, int64_t n);
void QuantizeRowMXFP4(const float* x, void* y, int64_t n);

// Super-blocks of 256 (quantize_k.cc).
void QuantizeRowQ2_K(const float* x, void* y, int64_t n);
void QuantizeRowQ3_K(const float* x, void* y, int64_t n);
void QuantizeRowQ4_K(const float* x, void* y, int64_t n);
void QuantizeRowQ5_K(const float* x, void* y, int64_t n);
void QuantizeRowQ6_K(const float* x, void* y, int64_t n);
void QuantizeRowIQ4_XS(const float* x, void* y, int64_t n);

namespace quant_internal {

// ggml's nearest_int: round to nearest (ties to even) through the float magic-number trick.
// Only meaningful for |f| <= 2^22; outside that it returns what ggml's returns (garbage, but
// the same garbage), which keeps degenerate blocks byte-identical.
int NearestInt(float f);

// ggml's best_index_int8: the index of the nearest of the sorted `values` [n] to x, ties to
// the upper one.
int BestIndexInt8(int n, const int8_t* values, float x);

}  // namespace quant_internal
}  // namespace textgen

#endif  // TEXTGEN_ENGINE_FORMAT_QUANTIZE_ROWS_H_
