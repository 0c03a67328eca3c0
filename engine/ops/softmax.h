// Softmax-family ops over one row of F32 values (attention scores, vocabulary logits).
#ifndef TEXTGEN_ENGINE_OPS_SOFTMAX_H_
#define TEXTGEN_ENGINE_OPS_SOFTMAX_H_

#include <cstdint>

#include "engine/ops/isa_namespace.h"

namespace textgen::ops {
TG_ISA_BEGIN

// x[n] = softmax(x[n]) in place, n >= 1. Max-subtracted; exponentials in float, their sum in
// double. A row of all -inf is undefined (NaN); callers mask with finite values.
void Softmax(float* x, int64_t n);

// log(sum_i exp(x[i])) over x[n], n >= 1, in double (max-subtracted; float exponentials
// summed in double, so the result is good to ~1e-7 absolute).
double LogSumExp(const float* x, int64_t n);

// out[n] = x[i] - LogSumExp(x) in double: accurate log-probabilities of logits x[n], n >= 1.
// Uses a scratch copy, so x is unchanged.
void LogSoftmax(const float* x, int64_t n, double* out);

// Index of the largest x[i] over x[n], n >= 1; ties go to the lowest index. NaNs are skipped
// (index 0 if all are NaN).
int64_t ArgMax(const float* x, int64_t n);

// The portable C++ forms of the above (simd::Vec16<Portable> lanes): every level's kernels
// give their bytes (issue #32); exposed, through the kernel table, for the tests.
namespace portable {
void Softmax(float* x, int64_t n);
double LogSumExp(const float* x, int64_t n);
void LogSoftmax(const float* x, int64_t n, double* out);
int64_t ArgMax(const float* x, int64_t n);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops

namespace textgen::ops::internal {
TG_ISA_BEGIN

// simd::Dot and simd::Axpy (inline helpers of the kernels) as entry points of each level's
// kernel table, native and portable, so that the tests check every level's bytes.
float SimdDot(const float* a, const float* b, int64_t n);
void SimdAxpy(float alpha, const float* x, float* y, int64_t n);
namespace portable {
float SimdDot(const float* a, const float* b, int64_t n);
void SimdAxpy(float alpha, const float* x, float* y, int64_t n);
}  // namespace portable

TG_ISA_END
}  // namespace textgen::ops::internal

#endif  // TEXTGEN_ENGINE_OPS_SOFTMAX_H_
