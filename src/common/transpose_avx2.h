/* SPDX-License-Identifier: Apache-2.0 */
/* An 8 x 8 float transpose in AVX registers, for kernels that turn rows into lanes (gradref_copy's
 * tiles, conv3d_backprop_filter's few-channel panels). Include only in files compiled for x86;
 * the caller's target must include AVX. */
#ifndef GRADREF_COMMON_TRANSPOSE_AVX2_H
#define GRADREF_COMMON_TRANSPOSE_AVX2_H

#include <immintrin.h>

/* r[0..7] (rows) in place: r[c] becomes column c. In-lane unpacks and shuffles, then the
 * 128-bit halves exchanged. */
__attribute__((always_inline)) static inline void gradref__transpose8x8_ps(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) { /* u[i + c]: column c (and 4 + c) of rows i .. i + 3 */
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

#endif
