/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's NEON kernels: the depthwise row, 16 grad columns at a time in four
 * 4-lane chains, each in the reference's tap order (FMLA, one rounding, as fmaf); the
 * stride-2 scatter; and the QuantizedS8 requantisation of a row. */
#include "cbd_simd.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>
#  include <string.h>

enum { COLS = 16 };

/* Diff row `row` at columns [start, start + 16) with zeros past the row's ends (an exact no-op
 * term for a finite filter: the chains start at +0 and never become -0), for the windows that
 * reach past them; out of line, so the inner loop keeps its accumulators in registers. */
__attribute__((noinline)) static void edge_window(const float *row, int64_t start, int64_t O2,
                                                  float *tmp) {
    for (int l = 0; l < COLS; l++)
        tmp[l] = start + l >= 0 && start + l < O2 ? row[start + l] : 0.0f;
}

static void dw_row_neon(const gradref__cbd_dw_shape *p, const float *w, const float *const *rows,
                        const int64_t *base, int64_t nrows, float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    for (int64_t i2 = 0; i2 < I2; i2 += COLS) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + gradref__cbd_column_shift(p, kp2);
                const float32x4_t wv = vdupq_n_f32(w[base[r] + gradref__cbd_stored(p, 2, kp2)]);
                float tmp[COLS];
                const float *x = rows[r] + start;
                if (start < 0 || start + COLS > O2) {
                    edge_window(rows[r], start, O2, tmp);
                    x = tmp;
                }
                a0 = vfmaq_f32(a0, wv, vld1q_f32(x));
                a1 = vfmaq_f32(a1, wv, vld1q_f32(x + 4));
                a2 = vfmaq_f32(a2, wv, vld1q_f32(x + 8));
                a3 = vfmaq_f32(a3, wv, vld1q_f32(x + 12));
            }
        if (i2 + COLS <= I2) {
            vst1q_f32(out + i2, a0);
            vst1q_f32(out + i2 + 4, a1);
            vst1q_f32(out + i2 + 8, a2);
            vst1q_f32(out + i2 + 12, a3);
        } else {
            float tmp[COLS];
            vst1q_f32(tmp, a0);
            vst1q_f32(tmp + 4, a1);
            vst1q_f32(tmp + 8, a2);
            vst1q_f32(tmp + 12, a3);
            memcpy(out + i2, tmp, (size_t)(I2 - i2) * sizeof *tmp);
        }
    }
}

/* 8 values at a time interleaved with +0 by two ST2 stores, while a value follows the last +0
 * (odd_free), the rest one by one. */
static void scatter2_neon(const float *from, int64_t len, int64_t rows, float *row,
                          int64_t row_stride, int odd_free) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    for (int64_t r = 0; r < rows; r++, from += len, row += row_stride) {
        int64_t x = 0;
        for (; odd_free && x + 8 < len; x += 8) {
            const float32x4x2_t lo = {{vld1q_f32(from + x), zero}};
            const float32x4x2_t hi = {{vld1q_f32(from + x + 4), zero}};
            vst2q_f32(row + 2 * x, lo);
            vst2q_f32(row + 2 * x + 8, hi);
        }
        for (; x < len; x++)
            row[2 * x] = from[x];
    }
}

/* 8 sums a step in two halves: FMAXNM takes -128 for a NaN (the quotient's NaNs are quiet),
 * FCVTZS truncates, the half tests as the scalar one, then two narrowing moves (exact: the values
 * are in -128..127). */
static int16x4_t qs8_half(const float *from, float32x4_t as, float32x4_t gs) {
    float32x4_t v = vdivq_f32(vmulq_f32(vld1q_f32(from), as), gs);
    v = vminq_f32(vmaxnmq_f32(v, vdupq_n_f32(-128.0f)), vdupq_n_f32(127.0f));
    const int32x4_t t = vcvtq_s32_f32(v);
    const float32x4_t frac = vsubq_f32(v, vcvtq_f32_s32(t));
    const int32x4_t up = vreinterpretq_s32_u32(vcgeq_f32(frac, vdupq_n_f32(0.5f)));
    const int32x4_t down = vreinterpretq_s32_u32(vcleq_f32(frac, vdupq_n_f32(-0.5f)));
    return vmovn_s32(vaddq_s32(vsubq_s32(t, up), down)); /* masks are -1 */
}

static void qs8_row_neon(const float *from, int64_t n, float acc_scale, float grad_scale,
                         int8_t *out) {
    const float32x4_t as = vdupq_n_f32(acc_scale), gs = vdupq_n_f32(grad_scale);
    int64_t x = 0;
    for (; x + 8 <= n; x += 8)
        vst1_s8(out + x, vmovn_s16(vcombine_s16(qs8_half(from + x, as, gs),
                                                qs8_half(from + x + 4, as, gs))));
    for (; x < n; x++)
        out[x] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], acc_scale, grad_scale);
}

const gradref__cbd_kernels gradref__cbd_kernels_neon = {
    .isa = "neon",
    .dw_row = dw_row_neon,
    .scatter2 = scatter2_neon,
    .qs8_row = qs8_row_neon,
};

#else
typedef int gradref__cbd_neon_unused;
#endif
