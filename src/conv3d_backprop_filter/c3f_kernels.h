/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's kernel table, one per ISA (c3f_kernels.c portable and the chooser,
 * c3f_avx2.c, c3f_avx512.c, c3f_neon.c). */
#ifndef GRADREF_C3F_KERNELS_H
#define GRADREF_C3F_KERNELS_H

#include <stdint.h>

#include "common/isa.h"

struct gradref__sgemm_kernels;

/* The fast path's kernels of one ISA, picked once per call: the GEMM family's kernels;
 * panel_lanes, which fills lanes [la, lb) of `run` consecutive A-panel rows (mr floats apart):
 * row q takes channels from base + q * step (ci 0 at lane la) when lo <= q < hi, else zeros;
 * gather_panel, which fills rows q < len of a B panel (nr floats apart, a multiple of 16): lane
 * j < cols takes src[j * cs + q], the others zeros; copy_panel, the same from channels-last
 * rows (nr a multiple of 8): lane j < cols of row q takes src[q * step + j]; few_lanes, which fills
 * lanes l < n (n < 8) of `len` A-panel rows (width floats apart, dst at the first row's first
 * lane): row i takes src[l * cs + i - lo] when lo <= i < hi, else zeros, HF32-rounded to `hf32`
 * kept bits (0: as they are, else as gradref__hf32_round); round_hf32, dst[e] =
 * gradref__hf32_round(src[e], kept) for e < n (dst may be src; never NULL); add, the counter's sums
 * (NULL: the fast path's own loops). */
typedef struct gradref__c3f_kernels {
    const char *isa;
    const struct gradref__sgemm_kernels *gemm;
    void (*panel_lanes)(float *dst, int64_t mr, const float *base, int64_t step, int64_t lo,
                        int64_t hi, int64_t run, int64_t la, int64_t lb);
    void (*gather_panel)(float *dst, int64_t nr, const float *src, int64_t cs, int64_t len,
                         int64_t cols);
    void (*copy_panel)(float *dst, int64_t nr, const float *src, int64_t step, int64_t len,
                       int64_t cols);
    void (*few_lanes)(float *dst, int64_t width, const float *src, int64_t cs, int64_t lo,
                      int64_t hi, int64_t len, int64_t n, int hf32);
    void (*round_hf32)(float *dst, const float *src, int64_t n, int kept);
    /* dst[e] = older[e] + newer[e] for e < n, dst one of them (NULL: a plain loop) */
    void (*add)(float *dst, const float *older, const float *newer, int64_t n);
} gradref__c3f_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs (its
 * GEMM kernels are that level's). */
const gradref__c3f_kernels *gradref__c3f_kernels_for(int max_isa);

#ifdef GRADREF__X86
extern const gradref__c3f_kernels gradref__c3f_kernels_avx2;   /* c3f_avx2.c */
extern const gradref__c3f_kernels gradref__c3f_kernels_avx512; /* c3f_avx512.c */
#endif
#ifdef GRADREF__ARM64
extern const gradref__c3f_kernels gradref__c3f_kernels_neon; /* c3f_neon.c */
#endif

/* panel_lanes with 16-lane masked stores (c3f_avx512.c; the CPU must have AVX-512F). */
void gradref__c3f_f32_panel_lanes_avx512(float *dst, int64_t mr, const float *base, int64_t step,
                                         int64_t lo, int64_t hi, int64_t run, int64_t la,
                                         int64_t lb);

/* gather_panel with 8 x 8 register transposes (c3f_avx2.c; the CPU must have AVX2). */
void gradref__c3f_f32_gather_panel_avx2(float *dst, int64_t nr, const float *src, int64_t cs,
                                        int64_t len, int64_t cols);
/* few_lanes by 8 x 8 register transposes (c3f_avx2.c; the CPU must have AVX2). */
void gradref__c3f_f32_few_lanes_avx2(float *dst, int64_t width, const float *src, int64_t cs,
                                     int64_t lo, int64_t hi, int64_t len, int64_t n, int hf32);
/* round_hf32 with 8 and 16 lanes (c3f_avx2.c, c3f_avx512.c; the CPU must have AVX2,
 * AVX-512F). */
void gradref__c3f_round_hf32_avx2(float *dst, const float *src, int64_t n, int kept);
void gradref__c3f_round_hf32_avx512(float *dst, const float *src, int64_t n, int kept);
/* add with 8 and 16 lanes (c3f_avx2.c, c3f_avx512.c; the CPU must have AVX2, AVX-512F). */
void gradref__c3f_f32_add_avx2(float *dst, const float *older, const float *newer, int64_t n);
void gradref__c3f_f32_add_avx512(float *dst, const float *older, const float *newer, int64_t n);
/* gather_panel with 16 x 16 register transposes (c3f_avx512.c; the CPU must have AVX-512F). */
void gradref__c3f_f32_gather_panel_avx512(float *dst, int64_t nr, const float *src, int64_t cs,
                                          int64_t len, int64_t cols);

#endif
