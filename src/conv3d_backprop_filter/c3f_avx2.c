/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's AVX2 kernels (its GEMMs are common/gemm_avx2.c's): A-panel lanes,
 * B-panel rows gathered from channel-major dy (8 x 8 blocks transposed in registers) and the
 * counter's sums; the finiteness scan is common/nan_avx2.c's. */
#include "c3f_kernels.h"
#include "common/convert_array.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* Lanes [la, lb) of `run` consecutive panel rows (mr <= 8 floats apart): row q takes channels
 * from base + q * step (ci 0 at lane la) when lo <= q < hi, else zeros; 8-lane masked loads and
 * stores, the lanes outside [la, lb) never touched. */
static void panel_lanes_avx2(float *dst, int64_t mr, const float *base, int64_t step, int64_t lo,
                             int64_t hi, int64_t run, int64_t la, int64_t lb) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)la - 1)),
                                       _mm256_cmpgt_epi32(_mm256_set1_epi32((int)lb), lane));
    const __m256 zero = _mm256_setzero_ps();
    int64_t q = 0;
    for (; q < lo; q++)
        _mm256_maskstore_ps(dst + q * mr, m, zero);
    for (; q < hi; q++)
        _mm256_maskstore_ps(dst + q * mr, m, _mm256_maskload_ps(base + q * step - la, m));
    for (; q < run; q++)
        _mm256_maskstore_ps(dst + q * mr, m, zero);
}

void gradref__c3f_f32_gather_panel_avx2(float *dst, int64_t nr, const float *src, int64_t cs,
                                        int64_t len, int64_t cols) {
    for (int64_t j0 = 0; j0 < nr; j0 += 8)
        for (int64_t q0 = 0; q0 < len; q0 += 8) {
            if (j0 + 8 <= cols && q0 + 8 <= len) {
                gradref__transpose8x8_u32_avx2((const uint32_t *)(const void *)(src + j0 * cs + q0),
                                               cs, (uint32_t *)(void *)(dst + q0 * nr + j0), nr);
                continue;
            }
            for (int64_t q = q0; q < q0 + 8 && q < len; q++) /* an edge block */
                for (int64_t j = j0; j < j0 + 8; j++)
                    dst[q * nr + j] = j < cols ? src[j * cs + q] : 0.0f;
        }
}

void gradref__c3f_f32_add_avx2(float *dst, const float *older, const float *newer, int64_t n) {
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(dst + e,
                         _mm256_add_ps(_mm256_loadu_ps(older + e), _mm256_loadu_ps(newer + e)));
    for (; e < n; e++)
        dst[e] = older[e] + newer[e];
}

const gradref__c3f_kernels gradref__c3f_kernels_avx2 = {
    .isa = "avx2",
    .gemm = &gradref__sgemm_kernels_avx2,
    .panel_lanes = panel_lanes_avx2,
    .gather_panel = gradref__c3f_f32_gather_panel_avx2,
    .add = gradref__c3f_f32_add_avx2,
};

#else
typedef int gradref__c3f_avx2_unused;
#endif
