/* SPDX-License-Identifier: Apache-2.0 */
/* A vector's first lanes stored by plain stores, for AVX2 kernels whose last vector of a row is
 * partial: AMD (Zen 3) microcodes a masked store (_mm256_maskstore_ps) at several times the cost
 * of these. Include only in files compiled for x86 with AVX. */
#ifndef GRADREF_COMMON_STORE_AVX2_H
#define GRADREF_COMMON_STORE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* The first n lanes of x to out (all 4 when n >= 4, none when n <= 0), by stores of 4, 2 and
 * 1 lanes: exactly those floats are written. */
__attribute__((always_inline)) static inline void gradref__store_first4_ps(float *out, __m128 x,
                                                                           int64_t n) {
    if (n >= 4) {
        _mm_storeu_ps(out, x);
        return;
    }
    if (n >= 2) {
        _mm_storel_pi((__m64 *)(void *)out, x);
        x = _mm_movehl_ps(x, x);
        out += 2;
        n -= 2;
    }
    if (n >= 1) _mm_store_ss(out, x);
}

/* The first n lanes of a to out (all 8 when n >= 8, none when n <= 0), as
 * gradref__store_first4_ps. */
__attribute__((always_inline)) static inline void gradref__store_first8_ps(float *out, __m256 a,
                                                                           int64_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(out, a);
        return;
    }
    if (n >= 4) {
        _mm_storeu_ps(out, _mm256_castps256_ps128(a));
        gradref__store_first4_ps(out + 4, _mm256_extractf128_ps(a, 1), n - 4);
        return;
    }
    gradref__store_first4_ps(out, _mm256_castps256_ps128(a), n);
}

#endif
