/* SPDX-License-Identifier: Apache-2.0 */
/* The canonical-NaN scan's AVX-512 body (nan.h): 64 floats a step, one unordered compare per
 * 16 into a mask, a masked store only where a NaN is; on request a compare per 16 notes +0.
 * And the finiteness scan: an exponent compare per 16 into a mask. */
#include "nan.h"

#include "isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

static inline __mmask16 positive_zeros(const float *p) {
    const __m512i z = _mm512_setzero_si512();
    return (__mmask16)(_mm512_cmpeq_epi32_mask(_mm512_loadu_si512(p), z) |
                       _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(p + 16), z) |
                       _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(p + 32), z) |
                       _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(p + 48), z));
}

int64_t gradref__canon_nans_f32_avx512(float *p, int64_t n, int *pos_zero) {
    const __m512 canon = _mm512_castsi512_ps(_mm512_set1_epi32((int)GRADREF__CANON_NAN_F32));
    __mmask16 zeros = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        if (pos_zero) zeros = (__mmask16)(zeros | positive_zeros(p + i));
        const __mmask16 a =
            _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i), _mm512_loadu_ps(p + i), _CMP_UNORD_Q);
        const __mmask16 b = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i + 16),
                                               _mm512_loadu_ps(p + i + 16), _CMP_UNORD_Q);
        const __mmask16 c = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i + 32),
                                               _mm512_loadu_ps(p + i + 32), _CMP_UNORD_Q);
        const __mmask16 d = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i + 48),
                                               _mm512_loadu_ps(p + i + 48), _CMP_UNORD_Q);
        if ((a | b | c | d) == 0) continue;
        _mm512_mask_storeu_ps(p + i, a, canon);
        _mm512_mask_storeu_ps(p + i + 16, b, canon);
        _mm512_mask_storeu_ps(p + i + 32, c, canon);
        _mm512_mask_storeu_ps(p + i + 48, d, canon);
    }
    if (pos_zero && zeros) *pos_zero = 1;
    return i;
}

int gradref__all_finite_f32_avx512(const float *d, int64_t n) {
    const __m512i exp = _mm512_set1_epi32(0x7f800000);
    __mmask16 hit = 0;
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        hit |= _mm512_cmpeq_epi32_mask(
            _mm512_and_si512(_mm512_loadu_si512((const void *)(d + e)), exp), exp);
    if (e < n) {
        const __mmask16 m = (__mmask16)((1u << (n - e)) - 1u);
        hit |= _mm512_mask_cmpeq_epi32_mask(
            m, _mm512_and_si512(_mm512_maskz_loadu_epi32(m, d + e), exp), exp);
    }
    return hit == 0;
}

#endif
