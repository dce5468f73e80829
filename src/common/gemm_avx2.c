/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's AVX2 + FMA micro-kernel (6 x 16) and the indirect AVX2 kernel whose A rows
 * are pointers. Every element is a chain of
 * _mm256_fmadd_ps in ascending p: one rounding per step, as C99 fmaf, so it equals the portable
 * kernel bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

#  include "store_avx2.h"

#  if GRADREF__AVX2_MR != 6
#    error "kernel_avx2 spells out 6 rows"
#  endif
/* The accumulators are named variables: with an array gcc 12 kept them on the stack and stored
 * every one on each step. */
#  define ACC_INIT(i)                                                                              \
    __m256 c##i##a = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();                    \
    __m256 c##i##b = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
#  define ACC_STEP(i)                                                                              \
    {                                                                                              \
      const __m256 ai = _mm256_broadcast_ss(a + p * 6 + i);                                        \
      c##i##a = _mm256_fmadd_ps(ai, b0, c##i##a);                                                  \
      c##i##b = _mm256_fmadd_ps(ai, b1, c##i##b);                                                  \
    }
#  define ACC_STORE(i)                                                                             \
    _mm256_storeu_ps(c + i * ldc, c##i##a);                                                        \
    _mm256_storeu_ps(c + i * ldc + 8, c##i##b);

static void kernel_avx2(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                        int load) {
    ACC_INIT(0) ACC_INIT(1) ACC_INIT(2) ACC_INIT(3) ACC_INIT(4) ACC_INIT(5);
    /* four steps an iteration: the loop's own instructions stay off the FMA ports' way */
#  pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
        ACC_STEP(0) ACC_STEP(1) ACC_STEP(2) ACC_STEP(3) ACC_STEP(4) ACC_STEP(5)
    }
    ACC_STORE(0) ACC_STORE(1) ACC_STORE(2) ACC_STORE(3) ACC_STORE(4) ACC_STORE(5)
}

/* The indirect kernel's body for R rows and V vectors of 8 columns, inlined with constants (12
 * accumulators, two B vectors and a broadcast: named variables, as in kernel_avx2). */
#  define IND_STEP(i)                                                                              \
    if (R > i) {                                                                                   \
      const __m256 ai = _mm256_broadcast_ss(a + i * a_cs);                                         \
      c##i##a = _mm256_fmadd_ps(ai, b0, c##i##a);                                                  \
      if (V == 2) c##i##b = _mm256_fmadd_ps(ai, b1, c##i##b);                                      \
    }
#  define IND_STORE(i)                                                                             \
    if (R > i) {                                                                                   \
      gradref__store_first8_ps(c + i * ldc, c##i##a, cols);                                        \
      if (V == 2) gradref__store_first8_ps(c + i * ldc + 8, c##i##b, cols - 8);                    \
    }
__attribute__((always_inline)) static inline void
indirect_body(int R, int V, int64_t k, const float *const *a_rows, int64_t a_off, int64_t a_cs,
              const float *b, float *c, int64_t ldc, int cols) {
    __m256 c0a = _mm256_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a;
    __m256 c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a;
#  pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        if (a_rows[p] == NULL) continue;
        const float *a = a_rows[p] + a_off;
        const __m256 b0 = _mm256_loadu_ps(b + p * 16);
        const __m256 b1 = V == 2 ? _mm256_loadu_ps(b + p * 16 + 8) : b0;
        IND_STEP(0) IND_STEP(1) IND_STEP(2) IND_STEP(3) IND_STEP(4) IND_STEP(5)
    }
    IND_STORE(0) IND_STORE(1) IND_STORE(2) IND_STORE(3) IND_STORE(4) IND_STORE(5)
}

typedef void (*indirect_kernel)(int64_t k, const float *const *a_rows, int64_t a_off, int64_t a_cs,
                                const float *b, float *c, int64_t ldc, int cols);

#  define INDIRECT(R, V)                                                                           \
    static void indirect_##R##_##V(int64_t k, const float *const *a_rows, int64_t a_off,           \
                                   int64_t a_cs, const float *b, float *c, int64_t ldc,            \
                                   int cols) {                                                     \
      indirect_body(R, V, k, a_rows, a_off, a_cs, b, c, ldc, cols);                                \
    }
#  define INDIRECT_ROWS(R) INDIRECT(R, 1) INDIRECT(R, 2)
GRADREF__FOR_ROWS_1_TO_6(INDIRECT_ROWS)

static const indirect_kernel indirect_kernels[GRADREF__AVX2_MR][2] = {
    {indirect_1_1, indirect_1_2}, {indirect_2_1, indirect_2_2}, {indirect_3_1, indirect_3_2},
    {indirect_4_1, indirect_4_2}, {indirect_5_1, indirect_5_2}, {indirect_6_1, indirect_6_2},
};

void gradref__sgemm_indirect_avx2(int rows, int cols, int64_t k, const float *const *a_rows,
                                  int64_t a_off, int64_t a_cs, const float *b, float *c,
                                  int64_t ldc) {
    indirect_kernels[rows - 1][cols > 8](k, a_rows, a_off, a_cs, b, c, ldc, cols);
}

const gradref__sgemm_kernels gradref__sgemm_kernels_avx2 = {
    .isa = "avx2",
    .mr = GRADREF__AVX2_MR,
    .nr = GRADREF__AVX2_NR,
    .micro = kernel_avx2,
    .indirect = gradref__sgemm_indirect_avx2,
};

#else
typedef int gradref__gemm_avx2_unused;
#endif
