// Q4_K, Q4_0 and Q8_0 fast mode (--compute bf16) at the AVX-512 VNNI levels with weight rows in the
// vector lanes ("column lanes"): a panel of 16 weight rows is repacked once per call into a
// per-thread buffer, 4 consecutive u8 values of each row per int32 lane, and every activation row
// of the call then meets it with VPDPBUSD against 4 activation bytes broadcast to all lanes.
//
// Why: the row-lane tiles of kquant_dot.cc hold parts of one row's super-block in the lanes, so
// each super-block and (activation row, weight row) pair pays its own conversion, scaling and,
// at the end, horizontal sum: 4 VPDPBUSD to ~8 other vector ops. Here the per-sub-block and
// per-super-block work is done for 16 rows at once (64 VPDPBUSD to ~30 other ops), and the
// weights are unpacked once per call instead of once per 4 activation rows.
//
// Arithmetic (Q4_0: per block of 32, acc = fma(F32(sumi), F32(d_w) * d_x, acc) with the exact
// sumi = sum q * x - 8 * sum x of ggml's vec_dot_q4_0_q8_0; Q4_K below): per row and super-block
// the integers of ggml's vec_dot_q4_K_q8_K, exact (sumi = sum_j sc_j * sum_l q * x over sub-blocks
// j of 32, summs = sum_j mn_j * bsum_j), then acc = fma(F32(sumi), d_w * d_x, acc); acc =
// fnmadd(F32(summs), dmin_w * d_x, acc), super-block by super-block. Each row's result depends on
// nothing but its own operands: not on the row count, the row range or which lane it lands in
// (batch invariance), and decode runs the same code with one activation row.
//
// Row-range contract as engine/ops/q8_0_gemv.h (y[i * ldy + r] for r in [r0, r1), nothing else
// touched; single-threaded; arguments trusted; w.in a multiple of 256).
#ifndef TEXTGEN_ENGINE_OPS_QUANT_COLUMNS_H_
#define TEXTGEN_ENGINE_OPS_QUANT_COLUMNS_H_

#include <cstdint>

#include "engine/format/quant_blocks.h"
#include "engine/ops/isa_namespace.h"
#include "engine/ops/kquant_simd.h"
#include "engine/ops/quant_dot_small.h"
#include "engine/ops/weight.h"

namespace textgen::ops {
TG_ISA_BEGIN

#if defined(TG_KQUANT_512)
// The activations' sums per sub-block of 32 (bsums[2j] + bsums[2j + 1], at most 32 * 127 in
// magnitude, so int16), out [count, 8]: read in pairs, as int16 pairs, by VPDPWSSD.
void SubBlockSumsForQ4K(const BlockQ8_K* xq, int64_t count, int16_t* out);

// Q4_K weights w times activation rows [0, n) of xq [n, w.in / 256] (sums: xs [n, w.in / 256, 8]
// from SubBlockSumsForQ4K), for weight rows [r0, r1).
void GemvQ4KColumns(const WeightView& w, const BlockQ8_K* xq, const int16_t* xs, int64_t n,
                    float* y, int64_t ldy, int64_t r0, int64_t r1);

// Q4_0 weights w times activation rows [0, n) of xq [n, w.in / 32] (QuantizeActivationsQ8_1), for
// weight rows [r0, r1).
void GemvQ4_0Columns(const WeightView& w, const BlockQ8_1* xq, int64_t n, float* y, int64_t ldy,
                     int64_t r0, int64_t r1);

// Per Q8_0 activation block, once per call: dx = F32(d), cx = -128 * sum(q) (the offset of the
// weights' u8 form), dx and cx [count].
void PrepareQ8_0Columns(const BlockQ8_0* xq, int64_t count, float* dx, int32_t* cx);

// Q8_0 weights w times activation rows [0, n) of xq [n, w.in / 32] (dx, cx from
// PrepareQ8_0Columns, same layout), for weight rows [r0, r1): per block of 32, acc = fma(F32(sumi),
// F32(d_w) * d_x, acc) with ggml's exact sumi = sum q_w * q_x.
void GemvQ8_0Columns(const WeightView& w, const BlockQ8_0* xq, const float* dx, const int32_t* cx,
                     int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1);
#endif

TG_ISA_END
}  // namespace textgen::ops

#endif  // TEXTGEN_ENGINE_OPS_QUANT_COLUMNS_H_
