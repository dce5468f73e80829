/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's AVX2 kernels (its GEMMs are common/gemm_avx2.c's): A-panel lanes
 * (from channels-last x, or few channels transposed 8 x 8 in registers), B-panel rows gathered
 * from channel-major dy (8 x 8 blocks transposed in registers) or copied from channels-last dy,
 * HF32 rounding and the counter's sums; the finiteness scan is common/nan_avx2.c's. */
#include "c3f_kernels.h"
#include "common/convert_array.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

#  include "common/store_avx2.h"
#  include "common/transpose_avx2.h"

/* p[l] = s[l] (s NULL: +0) for l < n, by 4-, 2- and 1-float moves: no masked load or store
 * (AMD runs AVX2's masked stores as microcode). */
static inline void move_lanes(float *p, const float *s, int64_t n) {
    const __m128 zero = _mm_setzero_ps();
    for (; n >= 4; n -= 4, p += 4, s = s ? s + 4 : NULL)
        _mm_storeu_ps(p, s ? _mm_loadu_ps(s) : zero);
    if (n >= 2) {
        _mm_storel_pi((__m64 *)(void *)p,
                      s ? _mm_loadl_pi(zero, (const __m64 *)(const void *)s) : zero);
        p += 2, n -= 2, s = s ? s + 2 : NULL;
    }
    if (n) _mm_store_ss(p, s ? _mm_load_ss(s) : zero);
}

/* panel_lanes for n = lb - la lanes, a constant in each instance. */
__attribute__((always_inline)) static inline void lanes_n(float *dst, int64_t mr, const float *base,
                                                          int64_t step, int64_t lo, int64_t hi,
                                                          int64_t run, int64_t n) {
    int64_t q = 0;
    for (; q < lo; q++)
        move_lanes(dst + q * mr, NULL, n);
    for (; q < hi; q++)
        move_lanes(dst + q * mr, base + q * step, n);
    for (; q < run; q++)
        move_lanes(dst + q * mr, NULL, n);
}

/* Lanes [la, lb) of `run` consecutive panel rows (mr floats apart, lb <= 8): row q takes
 * channels from base + q * step (ci 0 at lane la) when lo <= q < hi, else zeros; the lanes
 * outside [la, lb) never touched. */
static void panel_lanes_avx2(float *dst, int64_t mr, const float *base, int64_t step, int64_t lo,
                             int64_t hi, int64_t run, int64_t la, int64_t lb) {
    dst += la;
    switch (lb - la) { /* the lane count a constant in each */
    case 1: lanes_n(dst, mr, base, step, lo, hi, run, 1); return;
    case 2: lanes_n(dst, mr, base, step, lo, hi, run, 2); return;
    case 3: lanes_n(dst, mr, base, step, lo, hi, run, 3); return;
    case 4: lanes_n(dst, mr, base, step, lo, hi, run, 4); return;
    case 5: lanes_n(dst, mr, base, step, lo, hi, run, 5); return;
    case 6: lanes_n(dst, mr, base, step, lo, hi, run, 6); return;
    case 7: lanes_n(dst, mr, base, step, lo, hi, run, 7); return;
    case 8: lanes_n(dst, mr, base, step, lo, hi, run, 8); return;
    default: lanes_n(dst, mr, base, step, lo, hi, run, lb - la);
    }
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

static void copy_panel_avx2(float *dst, int64_t nr, const float *src, int64_t step, int64_t len,
                            int64_t cols) {
    const int64_t full = cols / 8 * 8;
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(cols - full)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t q = 0; q < len; q++, dst += nr, src += step) {
        int64_t j = 0;
        for (; j < full; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
        for (; j < nr; j += 8) /* the last lanes of channels, zeros past them */
            _mm256_storeu_ps(dst + j,
                             j < cols ? _mm256_maskload_ps(src + j, tail) : _mm256_setzero_ps());
    }
}

/* The bits of v HF32-rounded as gradref__hf32_round: NaNs quieted, half the last kept bit
 * added, the rest cut. */
static inline __m256 hf32_round(__m256 v, __m256i half, __m256i keep) {
    const __m256i b = _mm256_castps_si256(v);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(b, _mm256_and_si256(nan, _mm256_set1_epi32(0x400000)));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_add_epi32(quiet, half), keep));
}

void gradref__c3f_f32_few_lanes_avx2(float *dst, int64_t width, const float *src, int64_t cs,
                                     int64_t lo, int64_t hi, int64_t len, int64_t n, int hf32) {
    const __m256 zero = _mm256_setzero_ps();
    const uint32_t cut = hf32 ? 23u - (uint32_t)hf32 : 1u;
    const __m256i half = _mm256_set1_epi32((int)(1u << (cut - 1))),
                  keep = _mm256_set1_epi32((int)~((1u << cut) - 1u));
    int64_t i = 0;
    for (; i < lo; i++)
        gradref__store_first8_ps(dst + i * width, zero, n);
    for (; i < hi; i += 8) { /* 8 positions of the n channels, transposed into 8 rows */
        const int64_t m = hi - i < 8 ? hi - i : 8;
        const __m256i inside = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m),
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 r[8];
        for (int64_t l = 0; l < 8; l++) {
            const float *from = src + l * cs + (i - lo);
            r[l] = l >= n   ? zero
                   : m == 8 ? _mm256_loadu_ps(from)
                            : _mm256_maskload_ps(from, inside);
            if (hf32 && l < n) r[l] = hf32_round(r[l], half, keep);
        }
        gradref__transpose8x8_ps(r);
        for (int64_t q = 0; q < m; q++)
            gradref__store_first8_ps(dst + (i + q) * width, r[q], n);
    }
    for (i = hi; i < len; i++)
        gradref__store_first8_ps(dst + i * width, zero, n);
}

void gradref__c3f_round_hf32_avx2(float *dst, const float *src, int64_t n, int kept) {
    const uint32_t cut = 23u - (uint32_t)kept;
    const __m256i half = _mm256_set1_epi32((int)(1u << (cut - 1))),
                  keep = _mm256_set1_epi32((int)~((1u << cut) - 1u));
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        _mm256_storeu_ps(dst + e, hf32_round(_mm256_loadu_ps(src + e), half, keep));
    if (e == n) return;
    const __m256i inside = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - e)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    gradref__store_first8_ps(dst + e, hf32_round(_mm256_maskload_ps(src + e, inside), half, keep),
                             n - e);
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
    .copy_panel = copy_panel_avx2,
    .few_lanes = gradref__c3f_f32_few_lanes_avx2,
    .round_hf32 = gradref__c3f_round_hf32_avx2,
    .add = gradref__c3f_f32_add_avx2,
};

#else
typedef int gradref__c3f_avx2_unused;
#endif
