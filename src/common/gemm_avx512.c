/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's AVX-512 micro-kernel (14 x 32) and the indirect AVX-512 kernel whose A
 * rows are pointers. Every element is a chain of _mm512_fmadd_ps in ascending p: one rounding
 * per step, as C99 fmaf, so they equal the portable kernel bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

static void kernel_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                          int load) {
    enum { MR = GRADREF__AVX512_MR };
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        const __m512 b0 = _mm512_loadu_ps(b + p * 32), b1 = _mm512_loadu_ps(b + p * 32 + 16);
        for (int i = 0; i < MR; i++) {
            const __m512 ai = _mm512_set1_ps(a[p * MR + i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}

/* The indirect kernel's body for R rows and V vectors of 16 columns, inlined with constants
 * so the accumulators stay in registers. */
__attribute__((always_inline)) static inline void
indirect_body(int R, int V, int64_t k, const float *const *a_rows, int64_t a_off, int64_t a_cs,
              const float *b, float *c, int64_t ldc, __mmask16 m0, __mmask16 m1) {
    __m512 acc[GRADREF__AVX512_MR][2];
    for (int i = 0; i < R; i++)
        for (int v = 0; v < V; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        if (a_rows[p] == NULL) continue;
        const float *a = a_rows[p] + a_off;
        const __m512 b0 = _mm512_loadu_ps(b + p * 32);
        const __m512 b1 = V == 2 ? _mm512_loadu_ps(b + p * 32 + 16) : b0;
        for (int i = 0; i < R; i++) {
            const __m512 ai = _mm512_set1_ps(a[i * a_cs]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            if (V == 2) acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < R; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, acc[i][0]);
        if (V == 2) _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc[i][1]);
    }
}

typedef void (*indirect_kernel)(int64_t k, const float *const *a_rows, int64_t a_off, int64_t a_cs,
                                const float *b, float *c, int64_t ldc, __mmask16 m0, __mmask16 m1);

#  define INDIRECT(R, V)                                                                           \
    static void indirect_##R##_##V(int64_t k, const float *const *a_rows, int64_t a_off,           \
                                   int64_t a_cs, const float *b, float *c, int64_t ldc,            \
                                   __mmask16 m0, __mmask16 m1) {                                   \
      indirect_body(R, V, k, a_rows, a_off, a_cs, b, c, ldc, m0, m1);                              \
    }
#  define INDIRECT_ROWS(R) INDIRECT(R, 1) INDIRECT(R, 2)
GRADREF__FOR_ROWS_1_TO_12(INDIRECT_ROWS)
INDIRECT_ROWS(13)
INDIRECT_ROWS(14)

static const indirect_kernel indirect_kernels[GRADREF__AVX512_MR][2] = {
    {indirect_1_1, indirect_1_2},   {indirect_2_1, indirect_2_2},   {indirect_3_1, indirect_3_2},
    {indirect_4_1, indirect_4_2},   {indirect_5_1, indirect_5_2},   {indirect_6_1, indirect_6_2},
    {indirect_7_1, indirect_7_2},   {indirect_8_1, indirect_8_2},   {indirect_9_1, indirect_9_2},
    {indirect_10_1, indirect_10_2}, {indirect_11_1, indirect_11_2}, {indirect_12_1, indirect_12_2},
    {indirect_13_1, indirect_13_2}, {indirect_14_1, indirect_14_2},
};

void gradref__sgemm_indirect_avx512(int rows, int cols, int64_t k, const float *const *a_rows,
                                    int64_t a_off, int64_t a_cs, const float *b, float *c,
                                    int64_t ldc) {
    const uint32_t bits = cols >= 32 ? 0xffffffffu : (1u << cols) - 1u;
    indirect_kernels[rows - 1][cols > 16](k, a_rows, a_off, a_cs, b, c, ldc,
                                          (__mmask16)(bits & 0xffffu), (__mmask16)(bits >> 16));
}

const gradref__sgemm_kernels gradref__sgemm_kernels_avx512 = {
    .isa = "avx512",
    .mr = GRADREF__AVX512_MR,
    .nr = GRADREF__AVX512_NR,
    .micro = kernel_avx512,
    .indirect = gradref__sgemm_indirect_avx512,
};

#else
typedef int gradref__gemm_avx512_unused;
#endif
