/* SPDX-License-Identifier: Apache-2.0 */
/* A 16 x 16 float transpose in AVX-512 registers, for kernels that turn rows of channels into
 * lanes of points (or back). Include only in files compiled for x86; the caller's target must
 * include AVX-512F. */
#ifndef GRADREF_COMMON_TRANSPOSE_AVX512_H
#define GRADREF_COMMON_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* r[0..15] (rows) in place: r[c] becomes column c. Three stages of in-lane and lane shuffles. */
__attribute__((always_inline)) static inline void gradref__transpose16x16_ps(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* u[i + c]: column 4k + c of rows i .. i + 3, lane k */
        u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) { /* t[c]: columns c, 8 + c; t[4 + c]: 4 + c, 12 + c */
        t[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        t[8 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
    }
}

#endif
