/* SPDX-License-Identifier: Apache-2.0 */
/* The canonical-NaN scan's AVX2 body (nan.h): 32 floats a step, one unordered compare and an
 * OR per 8, a store only where a NaN is; on request an integer compare per 8 notes +0. And
 * the finiteness scan: an exponent compare per 8. */
#include "nan.h"

#include "isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

static inline __m256i positive_zeros(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i za = _mm256_cmpeq_epi32(_mm256_castps_si256(a), z);
    const __m256i zb = _mm256_cmpeq_epi32(_mm256_castps_si256(b), z);
    const __m256i zc = _mm256_cmpeq_epi32(_mm256_castps_si256(c), z);
    const __m256i zd = _mm256_cmpeq_epi32(_mm256_castps_si256(d), z);
    return _mm256_or_si256(_mm256_or_si256(za, zb), _mm256_or_si256(zc, zd));
}

int64_t gradref__canon_nans_f32_avx2(float *p, int64_t n, int *pos_zero) {
    const __m256 canon = _mm256_castsi256_ps(_mm256_set1_epi32((int)GRADREF__CANON_NAN_F32));
    __m256i zeros = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 a = _mm256_loadu_ps(p + i), b = _mm256_loadu_ps(p + i + 8);
        const __m256 c = _mm256_loadu_ps(p + i + 16), d = _mm256_loadu_ps(p + i + 24);
        if (pos_zero) zeros = _mm256_or_si256(zeros, positive_zeros(a, b, c, d));
        const __m256 na = _mm256_cmp_ps(a, a, _CMP_UNORD_Q), nb = _mm256_cmp_ps(b, b, _CMP_UNORD_Q);
        const __m256 nc = _mm256_cmp_ps(c, c, _CMP_UNORD_Q), nd = _mm256_cmp_ps(d, d, _CMP_UNORD_Q);
        if (_mm256_testz_ps(_mm256_or_ps(_mm256_or_ps(na, nb), _mm256_or_ps(nc, nd)),
                            _mm256_or_ps(_mm256_or_ps(na, nb), _mm256_or_ps(nc, nd))))
            continue;
        _mm256_storeu_ps(p + i, _mm256_blendv_ps(a, canon, na));
        _mm256_storeu_ps(p + i + 8, _mm256_blendv_ps(b, canon, nb));
        _mm256_storeu_ps(p + i + 16, _mm256_blendv_ps(c, canon, nc));
        _mm256_storeu_ps(p + i + 24, _mm256_blendv_ps(d, canon, nd));
    }
    if (pos_zero && !_mm256_testz_si256(zeros, zeros)) *pos_zero = 1;
    return i;
}

int gradref__all_finite_f32_avx2(const float *d, int64_t n) {
    const __m256i exp = _mm256_set1_epi32(0x7f800000);
    __m256i hit = _mm256_setzero_si256();
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
        const __m256i x = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(d + e)), exp);
        hit = _mm256_or_si256(hit, _mm256_cmpeq_epi32(x, exp));
    }
    int finite = _mm256_testz_si256(hit, hit);
    for (; e < n; e++)
        finite &= (d[e] - d[e]) == 0.0f; /* Inf - Inf and NaN are NaN */
    return finite;
}

#endif
