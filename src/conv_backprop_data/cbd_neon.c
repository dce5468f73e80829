/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's NEON depthwise row kernel: 16 grad columns at a time in four 4-lane
 * chains, each in the reference's tap order (FMLA, one rounding, as fmaf). */
#include "cbd_simd.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>
#  include <string.h>

enum { COLS = 16 };

/* Diff row `row` at columns [start, start + 16), zeros past the row's ends (an exact no-op
 * term for a finite filter: the chains start at +0 and never become -0). */
static inline void window16(const float *row, int64_t start, int64_t O2, float32x4_t v[4]) {
    if (start >= 0 && start + COLS <= O2) {
        for (int q = 0; q < 4; q++)
            v[q] = vld1q_f32(row + start + 4 * q);
        return;
    }
    float tmp[COLS];
    for (int l = 0; l < COLS; l++)
        tmp[l] = start + l >= 0 && start + l < O2 ? row[start + l] : 0.0f;
    for (int q = 0; q < 4; q++)
        v[q] = vld1q_f32(tmp + 4 * q);
}

static void dw_row_neon(const gradref__cbd_dw_shape *p, const float *w, const float *const *rows,
                        const int64_t *base, int64_t nrows, float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    for (int64_t i2 = 0; i2 < I2; i2 += COLS) {
        float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                              vdupq_n_f32(0.0f)};
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                float32x4_t x[4];
                window16(rows[r], i2 + gradref__cbd_column_shift(p, kp2), O2, x);
                const float32x4_t wv = vdupq_n_f32(w[base[r] + gradref__cbd_stored(p, 2, kp2)]);
                for (int q = 0; q < 4; q++)
                    acc[q] = vfmaq_f32(acc[q], wv, x[q]);
            }
        if (i2 + COLS <= I2) {
            for (int q = 0; q < 4; q++)
                vst1q_f32(out + i2 + 4 * q, acc[q]);
        } else {
            float tmp[COLS];
            for (int q = 0; q < 4; q++)
                vst1q_f32(tmp + 4 * q, acc[q]);
            memcpy(out + i2, tmp, (size_t)(I2 - i2) * sizeof *tmp);
        }
    }
}

const gradref__cbd_kernels gradref__cbd_kernels_neon = {
    .isa = "neon",
    .dw_row = dw_row_neon,
};

#else
typedef int gradref__cbd_neon_unused;
#endif
