/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's AVX2 + FMA micro-kernel (6 x 16). Every element is a chain of
 * _mm256_fmadd_ps in ascending p: one rounding per step, as C99 fmaf, so it equals the portable
 * kernel bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF_X86
#  include <immintrin.h>

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

__attribute__((target("avx2,fma"))) static void
kernel_avx2(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int load) {
    ACC_INIT(0)
    ACC_INIT(1) ACC_INIT(2) ACC_INIT(3) ACC_INIT(4) ACC_INIT(5) for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
        ACC_STEP(0) ACC_STEP(1) ACC_STEP(2) ACC_STEP(3) ACC_STEP(4) ACC_STEP(5)
    }
    ACC_STORE(0) ACC_STORE(1) ACC_STORE(2) ACC_STORE(3) ACC_STORE(4) ACC_STORE(5)
}

const gradref__sgemm_kernels gradref__sgemm_kernels_avx2 = {"avx2", GRADREF__AVX2_MR,
                                                            GRADREF__AVX2_NR, kernel_avx2, NULL};

#else
typedef int gradref__gemm_avx2_unused;
#endif
