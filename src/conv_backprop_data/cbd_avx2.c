/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's AVX2 + FMA depthwise kernels: one row, and whole small planes for 3 x 3. */
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

/* Lanes l of o2 = start + l inside [0, O2), as an AVX2 load/store mask. */
__attribute__((target("avx2"))) static __m256i valid8(int64_t start, int64_t O2) {
    int32_t m[8];
    for (int l = 0; l < 8; l++)
        m[l] = start + l >= 0 && start + l < O2 ? -1 : 0;
    return _mm256_loadu_si256((const __m256i *)m);
}

/* dw_plane3x3 at 8 lanes: four grad rows by 8 columns, walking the diff rows they need in
 * ascending order; each diff row's three shifted (masked) loads feed every grad row it reaches,
 * so each accumulator sees its terms in the chain's order (diff row ascending, then the column
 * taps), as the AVX-512 kernel and the reference. Missing taps are zero weights or zero loads:
 * exact no-ops for a finite filter. */
/* grad row i1 + r's terms from the diff row o1 (named accumulators stay in registers) */
#  define DW_ROW8(acc, r)                                                                          \
    do {                                                                                           \
      const int64_t kp1 = i1 + (r) + pb1 - o1;                                                     \
      if ((r) < nrow && kp1 >= 0 && kp1 < K1) {                                                    \
        acc = _mm256_fmadd_ps(wr[kp1][0], v0, acc);                                                \
        acc = _mm256_fmadd_ps(wr[kp1][1], v1, acc);                                                \
        acc = _mm256_fmadd_ps(wr[kp1][2], v2, acc);                                                \
      }                                                                                            \
    } while (0)

__attribute__((target("avx2,fma"))) void
gradref__cbd_f32_dw_plane3x3_avx2(const gradref__cbd_dw_shape *p, const float *w, const float *diff,
                                  float *grad) {
    const int64_t I1 = p->I[1], I2 = p->I[2], O1 = p->O[1], O2 = p->O[2];
    const int64_t K1 = p->K[1], K2 = p->K[2], pb1 = p->pad[1];
    __m256 wr[3][3]; /* [kp1][c], c = column taps in chain order (kp2 descending) */
    int64_t shift[3] = {0, 0, 0};
    for (int64_t c = 0; c < 3; c++)
        if (c < K2) shift[c] = gradref__cbd_column_shift(p, K2 - 1 - c);
    for (int64_t kp1 = 0; kp1 < 3; kp1++)
        for (int64_t c = 0; c < 3; c++)
            wr[kp1][c] = kp1 < K1 && c < K2
                             ? _mm256_set1_ps(w[gradref__cbd_stored(p, 1, kp1) * K2 +
                                                gradref__cbd_stored(p, 2, K2 - 1 - c)])
                             : _mm256_setzero_ps();
    const __m256i none = _mm256_setzero_si256();
    for (int64_t b0 = 0; b0 < I2; b0 += 8) {
        const __m256i m0 = K2 > 0 ? valid8(b0 + shift[0], O2) : none,
                      m1 = K2 > 1 ? valid8(b0 + shift[1], O2) : none,
                      m2 = K2 > 2 ? valid8(b0 + shift[2], O2) : none;
        const __m256i st = valid8(b0, I2);
        /* whole windows take plain loads and stores (AMD microcodes the masked ones) */
        const int f0 = K2 > 0 && b0 + shift[0] >= 0 && b0 + shift[0] + 8 <= O2,
                  f1 = K2 > 1 && b0 + shift[1] >= 0 && b0 + shift[1] + 8 <= O2,
                  f2 = K2 > 2 && b0 + shift[2] >= 0 && b0 + shift[2] + 8 <= O2, fs = b0 + 8 <= I2;
        for (int64_t i1 = 0; i1 < I1; i1 += 4) {
            const int64_t nrow = I1 - i1 < 4 ? I1 - i1 : 4;
            int64_t lo = i1 + pb1 - (K1 - 1), hi = i1 + nrow - 1 + pb1;
            if (lo < 0) lo = 0;
            if (hi > O1 - 1) hi = O1 - 1;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t o1 = lo; o1 <= hi; o1++) {
                const float *row = diff + o1 * O2 + b0;
                const __m256 v0 =
                    f0 ? _mm256_loadu_ps(row + shift[0]) : _mm256_maskload_ps(row + shift[0], m0);
                const __m256 v1 =
                    f1 ? _mm256_loadu_ps(row + shift[1]) : _mm256_maskload_ps(row + shift[1], m1);
                const __m256 v2 =
                    f2 ? _mm256_loadu_ps(row + shift[2]) : _mm256_maskload_ps(row + shift[2], m2);
                DW_ROW8(a0, 0);
                DW_ROW8(a1, 1);
                DW_ROW8(a2, 2);
                DW_ROW8(a3, 3);
            }
            float *out = grad + i1 * I2 + b0;
            if (fs && nrow == 4) {
                _mm256_storeu_ps(out, a0);
                _mm256_storeu_ps(out + I2, a1);
                _mm256_storeu_ps(out + 2 * I2, a2);
                _mm256_storeu_ps(out + 3 * I2, a3);
                continue;
            }
            _mm256_maskstore_ps(out, st, a0);
            if (nrow > 1) _mm256_maskstore_ps(out + I2, st, a1);
            if (nrow > 2) _mm256_maskstore_ps(out + 2 * I2, st, a2);
            if (nrow > 3) _mm256_maskstore_ps(out + 3 * I2, st, a3);
        }
    }
}
#  undef DW_ROW8
#else
typedef int gradref__cbd_avx2_unused;
#endif
