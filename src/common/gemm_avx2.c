/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's AVX2 + FMA micro-kernel (6 x 16). Every element is a chain of
 * _mm256_fmadd_ps in ascending p: one rounding per step, as C99 fmaf, so it equals the portable
 * kernel bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF_X86
#  include <immintrin.h>

__attribute__((target("avx2,fma"))) static void
kernel_avx2(int64_t k, const float *a, const float *b, float *c, int64_t ldc, int load) {
    enum { MR = GRADREF__AVX2_MR };
    __m256 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
        acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
        for (int i = 0; i < MR; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + p * MR + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

const gradref__sgemm_kernels gradref__sgemm_kernels_avx2 = {"avx2", GRADREF__AVX2_MR,
                                                            GRADREF__AVX2_NR, kernel_avx2, NULL};

#else
typedef int gradref__gemm_avx2_unused;
#endif
