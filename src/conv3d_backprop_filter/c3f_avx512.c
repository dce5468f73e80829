/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's AVX-512 kernels (its GEMMs are common/gemm_avx512.c's): filling
 * packed A-panel lanes from x in place, and gathering B-panel rows from channel-major dy. */
#include "c3f_kernels.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

#  include "common/transpose_avx512.h"

/* Lanes [la, lb) of `run` consecutive panel rows (mr floats apart): row q takes channels from
 * base + q * step (ci 0 at lane la) when lo <= q < hi, else zeros. */
void gradref__c3f_f32_panel_lanes_avx512(float *dst, int64_t mr, const float *base, int64_t step,
                                         int64_t lo, int64_t hi, int64_t run, int64_t la,
                                         int64_t lb) {
    const __mmask16 m = (__mmask16)(((1u << lb) - 1u) & ~((1u << la) - 1u));
    const __m512 zero = _mm512_setzero_ps();
    int64_t q = 0;
    for (; q < lo; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, zero);
    for (; q < hi; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, _mm512_maskz_loadu_ps(m, base + q * step - la));
    for (; q < run; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, zero);
}

/* floats ahead in a channel that the gather prefetches: 64 channel streams are more than the
 * hardware prefetchers follow */
#  define PREFETCH 128

/* Rows q < len of a B panel (nr floats apart, nr a multiple of 16): lane j < cols takes
 * src[j * cs + q], the lanes past cols zeros. 16 x 16 tiles transposed in registers. */
void gradref__c3f_f32_gather_panel_avx512(float *dst, int64_t nr, const float *src, int64_t cs,
                                          int64_t len, int64_t cols) {
    for (int64_t j0 = 0; j0 < nr; j0 += 16) /* 16 channels along the whole run */
        for (int64_t q0 = 0; q0 < len; q0 += 16) {
            const int64_t n = len - q0 < 16 ? len - q0 : 16;
            const __mmask16 m = (__mmask16)((1u << n) - 1u);
            __m512 r[16];
            for (int64_t j = 0; j < 16 && j0 + j < cols; j++) /* the channel's next runs */
                _mm_prefetch((const char *)(src + (j0 + j) * cs + q0 + PREFETCH), _MM_HINT_T0);
            for (int64_t j = 0; j < 16; j++)
                r[j] = j0 + j < cols ? _mm512_maskz_loadu_ps(m, src + (j0 + j) * cs + q0)
                                     : _mm512_setzero_ps();
            gradref__transpose16x16_ps(r);
            for (int64_t q = 0; q < n; q++)
                _mm512_storeu_ps(dst + (q0 + q) * nr + j0, r[q]);
        }
}

static void copy_panel_avx512(float *dst, int64_t nr, const float *src, int64_t step, int64_t len,
                              int64_t cols) {
    for (int64_t q = 0; q < len; q++, dst += nr, src += step)
        for (int64_t j = 0; j < nr; j += 16) { /* zeros past the channels */
            const int64_t n = cols - j < 0 ? 0 : cols - j;
            const __mmask16 m = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
            _mm512_storeu_ps(dst + j, _mm512_maskz_loadu_ps(m, src + j));
        }
}

void gradref__c3f_round_hf32_avx512(float *dst, const float *src, int64_t n, int kept) {
    const uint32_t cut = 23u - (uint32_t)kept;
    const __m512i half = _mm512_set1_epi32((int)(1u << (cut - 1))),
                  keep = _mm512_set1_epi32((int)~((1u << cut) - 1u));
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int64_t e = 0; e < n; e += 16) {
        const __mmask16 m = (__mmask16)(n - e >= 16 ? 0xffffu : (1u << (n - e)) - 1u);
        const __m512i b = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + e));
        /* NaNs quieted, half the last kept bit added, the rest cut (gradref__hf32_round) */
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, magnitude), inf);
        const __m512i quiet = _mm512_mask_or_epi32(b, nan, b, _mm512_set1_epi32(0x400000));
        _mm512_mask_storeu_ps(
            dst + e, m, _mm512_castsi512_ps(_mm512_and_si512(_mm512_add_epi32(quiet, half), keep)));
    }
}

void gradref__c3f_f32_add_avx512(float *dst, const float *older, const float *newer, int64_t n) {
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        _mm512_storeu_ps(dst + e,
                         _mm512_add_ps(_mm512_loadu_ps(older + e), _mm512_loadu_ps(newer + e)));
    if (e < n) {
        const __mmask16 m = (__mmask16)((1u << (n - e)) - 1u);
        _mm512_mask_storeu_ps(dst + e, m,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m, older + e),
                                            _mm512_maskz_loadu_ps(m, newer + e)));
    }
}

const gradref__c3f_kernels gradref__c3f_kernels_avx512 = {
    .isa = "avx512",
    .gemm = &gradref__sgemm_kernels_avx512,
    .panel_lanes = gradref__c3f_f32_panel_lanes_avx512,
    .gather_panel = gradref__c3f_f32_gather_panel_avx512,
    .copy_panel = copy_panel_avx512,
    .few_lanes = gradref__c3f_f32_few_lanes_avx2, /* its 8-lane rows hold the n < 8 */
    .round_hf32 = gradref__c3f_round_hf32_avx512,
    .add = gradref__c3f_f32_add_avx512,
};

#else
typedef int gradref__c3f_avx512_unused;
#endif
