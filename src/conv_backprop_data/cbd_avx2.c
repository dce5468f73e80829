/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's AVX2 + FMA depthwise row kernel. */
#include "cbd_simd.h"

#ifdef GRADREF_X86
#  include <immintrin.h>
#  include <math.h>

__attribute__((target("avx2,fma"))) void
gradref__cbd_f32_dw_row_avx2(const gradref__cbd_dw_shape *p, const float *w,
                             const float *const *rows, const int64_t *base, int64_t nrows,
                             float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    int64_t i2 = 0;
    for (; i2 + 8 <= I2; i2 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + gradref__cbd_column_shift(p, kp2);
                __m256 v;
                if (start >= 0 && start + 8 <= O2) {
                    v = _mm256_loadu_ps(rows[r] + start);
                } else {
                    float tmp[8];
                    for (int l = 0; l < 8; l++)
                        tmp[l] = start + l >= 0 && start + l < O2 ? rows[r][start + l] : 0.0f;
                    v = _mm256_loadu_ps(tmp);
                }
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[base[r] + gradref__cbd_stored(p, 2, kp2)]),
                                      v, acc);
            }
        _mm256_storeu_ps(out + i2, acc);
    }
    for (; i2 < I2; i2++) { /* the tail, as the portable loop */
        float acc = 0.0f;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t o2 = i2 + gradref__cbd_column_shift(p, kp2);
                if (o2 >= 0 && o2 < O2)
                    acc = fmaf(w[base[r] + gradref__cbd_stored(p, 2, kp2)], rows[r][o2], acc);
            }
        out[i2] = acc;
    }
}
#else
typedef int gradref__cbd_avx2_unused;
#endif
